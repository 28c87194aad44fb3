package configdoc

// meaning is a variable's description kept here for a reader whose file
// this package's owners may not edit yet.
type meaning struct{ name, where, meaning string }

// fallbackMeanings describes the variables only dlq-admin reads, until its
// readConfig (services/dlq-admin/run.go) carries its own variable table in
// its doc comment. Once it does, Collect reports each variable here as
// described twice: delete its line.
func fallbackMeanings() []meaning {
	const where = "services/dlq-admin/run.go (until then: tools/devstack/internal/configdoc/fallback.go)"
	return []meaning{
		{"DLQ_ADMIN_TOKENS", where, "the operators' tokens, `name:role:token,…` with role `viewer` (reads, personal data redacted) or `operator` (also replays, discards, resolves, approves); a name listed twice with the same role has two valid tokens (rotation). Unset: every request is refused"},
		{"DLQ_ADMIN_TOKEN_PERSONS", where, "`token-name=person,…`: the person holding each `DLQ_ADMIN_TOKENS` token; four-eyes refuses an approval by the requester's person (names compared NFKC, case folded, spaces collapsed); a token not listed is a person of its own name; a name that is no configured token is a configuration error"},
		{"DLQ_CONSUMER_GROUP", where, "the consumer group that moves `<topic>.dlq` records into the dead-letter store"},
		{"DLQ_CHECK_INTERVAL", where, "how often the dead-letter depth is measured and new letters are alerted on"},
		{"DLQ_DEPTH_ALERT_THRESHOLD", where, "open dead letters of one topic above which an alert is raised"},
		{"DLQ_STORE_RETRY_FOR", where, "how long one batch of dead letters is retried in place while Postgres cannot store it; then it is released (nothing committed) and polled again. A letter Postgres refuses for its data is stored raw (class `poison`) instead"},
		{"REPLAY_RATE", where, "dead letters per second a bulk replay job replays (0.1 to 10000)"},
		{"RECONCILE_INTERVAL", where, "how often the ledger integrity check runs (a River periodic job, one per interval across replicas; the first 30s after start); `POST /v1/reconciliation` runs one at once"},
		{"RECONCILE_STATEMENT_TIMEOUT", where, "the longest one statement of a ledger integrity check may run"},
		{"REQUIRE_SECOND_APPROVER", where, "four eyes: an operator's resolution of a NEEDS_REVIEW payout above `SECOND_APPROVER_RESOLUTION_AMOUNT`, and a bulk replay above `SECOND_APPROVER_THRESHOLD`, take effect only when a different person approves (`POST /v1/approvals/{id}/approve`); `true` in the production overlay"},
		{"SECOND_APPROVER_THRESHOLD", where, "with `REQUIRE_SECOND_APPROVER`, a bulk replay of more dead letters than this waits for a second operator"},
		{"SECOND_APPROVER_RESOLUTION_AMOUNT", where, "with `REQUIRE_SECOND_APPROVER`, a resolution of a payout of more than this amount (the currency's minor units) waits for a second person; `0` is every resolution (the production overlay's value)"},
		{"STALL_GROUPS", where, "the consumer groups watched for stalls; unset: `payout-worker`, `DLQ_CONSUMER_GROUP` and, when settlement webhooks are on, `SETTLEMENT_WEBHOOK_GROUP`. An alert (`consumer_stalled:<group>:<topic>:<partition>`, critical) names the member holding a partition that has lag and whose committed offset has not moved for `STALL_AFTER`"},
		{"STALL_AFTER", where, "how long a partition with lag may go without progress before it is a stall"},
		{"STALL_CHECK_INTERVAL", where, "how often the consumer groups' offsets and lag are read"},
		{"SETTLEMENT_WEBHOOK_URL", where, "where to POST every `aegis.settlements` event, signed (docs/guides/settlements.md); unset: off"},
		{"SETTLEMENT_WEBHOOK_SECRET", where, "the HMAC-SHA256 key that signs each settlement webhook (16+ characters; required with the URL)"},
		{"SETTLEMENT_WEBHOOK_GROUP", where, "the consumer group of settlement webhook delivery (watched by the stall alert when on); must differ from `DLQ_CONSUMER_GROUP`"},
		{"SETTLEMENT_WEBHOOK_TIMEOUT", where, "one POST's time limit"},
		{"SETTLEMENT_WEBHOOK_MAX_ATTEMPTS", where, "attempts per event (backoff 0.5s, 1s, 2s, 4s… capped at 10s, full jitter) before it is a dead letter"},
	}
}
