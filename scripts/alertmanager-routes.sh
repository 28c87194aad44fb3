#!/bin/sh
# Checks where deploy/observability/alertmanager.yml routes the main kinds of
# alert (make rules-check): critical pages PagerDuty, warnings go to Slack,
# and an alert without a severity falls back to Slack, never nowhere.
set -eu
config=${1:-deploy/observability/alertmanager.yml}
fail=0
check() {
	want=$1
	shift
	if ! amtool config routes test --config.file="$config" --verify.receivers="$want" "$@" >/dev/null 2>&1; then
		echo "alertmanager route: $* should go to $want, goes to $(amtool config routes test --config.file="$config" "$@" 2>/dev/null)"
		fail=1
	fi
}
check pagerduty severity=critical alertname=AegisServiceDown service=dlq-admin
check pagerduty severity=critical alertname=AegisDeadLetterUnprovenEvent service=dlq-admin topic=aegis.webhook.pending class=unproven_event
check pagerduty severity=critical alertname=AegisPSPDisagreementOpen service=webhook-api provider=stripe kind=paid_not_succeeded
check slack severity=warning alertname=AegisDeadLetterOpen service=dlq-admin topic=aegis.transactions class=permanent
check slack severity=warning alertname=AegisReceivableOpen service=payout-worker currency=usd
check slack alertname=AegisSomethingNew
[ "$fail" -eq 0 ] && echo "alertmanager routes: ok"
exit "$fail"
