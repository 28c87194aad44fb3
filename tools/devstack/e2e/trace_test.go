package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/telemetry/telemetrytest"
	"github.com/aegis-payments/aegis/tools/devstack/internal/published"
)

// services are the four binaries a payment crosses.
var services = []string{"webhook-api", "outbox-relay", "payout-worker", "dlq-admin"}

// TestOneTraceAcrossTheFourServices proves one payment is one trace:
// the four real binaries export to an in-process OTLP receiver, and
//   - a credited payment is one trace from the webhook request through its
//     outbox row, the relay's publish and the worker's credit to a replay of
//     its dead letter in dlq-admin;
//   - a payout request is one trace through the relay and the worker to the
//     PSP HTTP call that left it AWAITING_RESPONSE (then paid), with its
//     Postgres and Redis calls as spans;
//   - a payout the PSP refuses is one trace that reaches dlq-admin through
//     its dead letter (worker → outbox → relay → Kafka → dlq-admin);
//   - log lines written inside those spans carry the trace id.
func TestOneTraceAcrossTheFourServices(t *testing.T) {
	t.Parallel()
	rcv := telemetrytest.Start(t)
	env := rcv.Env()
	env["LOG_LEVEL"] = "debug" // webhook-api logs an accepted webhook at debug
	s := startWith(t, "300ms", env)
	ctx := context.Background()
	user := "tracy"

	// The credit.
	require.Equal(t, 200, s.signedStripe(payment("evt_trace_credit", user, 5000)).status)
	wallet := func() float64 {
		w := s.do(http.MethodGet, s.api+"/v1/wallets/"+user, nil, s.bearer(s.token))
		if w.status != 200 {
			return -1
		}
		return w.body["balance"].(float64)
	}
	s.eventually("wallet credited", func() bool { return wallet() == 5000 })
	creditTrace := storedTrace(t, s, `topic = 'aegis.webhook.pending' AND event_type = 'payment_intent.succeeded'`)

	// dlq-admin joins the credit's trace through a replay of a dead letter
	// made from the credit's record (as TestReplay... does: a credit the
	// operator suspects was lost); the replay finds it applied (noop).
	dlID := s.deadLetterOfCredit()
	r := s.do(http.MethodPost, fmt.Sprintf("%s/v1/dead-letters/%d/replay", s.dlq, dlID), nil, s.bearer(s.opToken))
	require.Equal(t, 202, r.status, r.raw)
	require.Equal(t, "noop", r.body["outcome"], r.raw)

	waitTrace(t, rcv, "credit", creditTrace, func(tr trace) error {
		if err := tr.hasServices(services...); err != nil {
			return err
		}
		for _, want := range []struct{ svc, name string }{
			{"webhook-api", "POST /webhooks/stripe"},
			{"webhook-api", "webhook commit"},
			{"outbox-relay", "aegis.webhook.pending publish"},
			{"payout-worker", "aegis.webhook.pending process"},
			{"dlq-admin", "dead letter replay"},
		} {
			if tr.find(want.svc, func(sp telemetrytest.Span) bool { return sp.Name == want.name }) == nil {
				return fmt.Errorf("no %s span %q", want.svc, want.name)
			}
		}
		if tr.find("payout-worker", isDB) == nil || tr.find("webhook-api", isDB) == nil {
			return fmt.Errorf("no Postgres span from the API's commit or the worker's credit")
		}
		return tr.connected()
	})

	// The payout.
	s.registerDestination(user, "stripe", "acct_tracy", "ba_tracy_checking")
	s.registerDestination(user, "stripe", "acct_invalid_closed", "")
	p := s.do(http.MethodPost, s.api+"/v1/payouts", []byte(`{"user_id":"tracy","amount":1500,"currency":"usd","destination":"acct_tracy","provider":"stripe"}`),
		map[string]string{"Authorization": "Bearer " + s.token, "Idempotency-Key": "trace-payout-1"})
	require.Equal(t, 202, p.status, p.raw)
	pid := p.body["payout_id"].(string)
	payoutStatus := func(id string) string {
		g := s.do(http.MethodGet, s.api+"/v1/payouts/"+id, nil, s.bearer(s.token))
		st, _ := g.body["status"].(string)
		return st
	}
	s.eventually("payout paid", func() bool { return payoutStatus(pid) == "SUCCEEDED" })
	require.Equal(t, 1, s.count(`SELECT count(*) FROM payout_transitions WHERE payout_id = $1 AND to_status = 'AWAITING_RESPONSE'`, pid))
	payoutTrace := storedTrace(t, s, fmt.Sprintf(`topic = 'aegis.transactions' AND headers->>'message_id' = 'payout:%s:request'`, pid))
	pspPort := strconv.Itoa(s.cfg.Ports.PSP)
	waitTrace(t, rcv, "payout", payoutTrace, func(tr trace) error {
		if err := tr.hasServices("webhook-api", "outbox-relay", "payout-worker"); err != nil {
			return err
		}
		if tr.find("webhook-api", func(sp telemetrytest.Span) bool { return sp.Name == "POST /v1/payouts" }) == nil {
			return fmt.Errorf("no webhook-api span for POST /v1/payouts")
		}
		if tr.find("payout-worker", func(sp telemetrytest.Span) bool {
			return sp.Kind == "SPAN_KIND_CLIENT" && sp.Attrs["server.port"] != "" && strings.Contains(sp.Attrs["server.port"], pspPort)
		}) == nil {
			return fmt.Errorf("no PSP HTTP client span (port %s) from the worker", pspPort)
		}
		if tr.find("payout-worker", func(sp telemetrytest.Span) bool { return slices.Contains(sp.Events, "payout AWAITING_RESPONSE") }) == nil {
			return fmt.Errorf("the worker's handling never moved the payout to AWAITING_RESPONSE in this trace")
		}
		if tr.find("payout-worker", func(sp telemetrytest.Span) bool {
			return sp.Attrs["db.system"] == "redis" || sp.Attrs["db.system.name"] == "redis"
		}) == nil {
			return fmt.Errorf("no Redis span from the worker")
		}
		if tr.find("payout-worker", isDB) == nil {
			return fmt.Errorf("no Postgres span from the worker")
		}
		return tr.connected()
	})

	// A payout the PSP refuses for good: its dead letter carries the trace
	// to dlq-admin, which stores it under a span of the same trace.
	bad := s.do(http.MethodPost, s.api+"/v1/payouts", []byte(`{"user_id":"tracy","amount":700,"currency":"usd","destination":"acct_invalid_closed","provider":"stripe"}`),
		map[string]string{"Authorization": "Bearer " + s.token, "Idempotency-Key": "trace-payout-2"})
	require.Equal(t, 202, bad.status, bad.raw)
	badID := bad.body["payout_id"].(string)
	s.eventually("dead letter stored", func() bool {
		return s.count(`SELECT count(*) FROM dead_letters WHERE original_topic = 'aegis.transactions' AND convert_from(payload, 'UTF8') LIKE '%'||$1||'%'`, badID) == 1
	})
	badTrace := storedTrace(t, s, fmt.Sprintf(`topic = 'aegis.transactions' AND headers->>'message_id' = 'payout:%s:request'`, badID))
	var letterTrace string
	require.NoError(t, s.db.Pool.QueryRow(ctx, `SELECT coalesce(headers->>'traceparent', '') FROM dead_letters
		WHERE original_topic = 'aegis.transactions' AND convert_from(payload, 'UTF8') LIKE '%'||$1||'%'`, badID).Scan(&letterTrace))
	require.Equal(t, badTrace, traceIDOf(t, letterTrace), "the dead letter keeps the payout's trace")
	waitTrace(t, rcv, "refused payout", badTrace, func(tr trace) error {
		if err := tr.hasServices(services...); err != nil {
			return err
		}
		if tr.find("dlq-admin", isDB) == nil {
			return fmt.Errorf("no Postgres span of dlq-admin storing the letter")
		}
		return tr.connected()
	})

	// Log lines written inside those spans carry the trace id: the API's
	// and the worker's line about the payout are found from its trace.
	for _, msg := range []string{"payout accepted", "payout sent to PSP"} {
		s.eventually(msg+" logged with the payout's trace id", func() bool {
			for _, line := range strings.Split(s.stackLog(), "\n") {
				if strings.Contains(line, `"msg":"`+msg+`"`) && strings.Contains(line, `"trace_id":"`+payoutTrace+`"`) &&
					strings.Contains(line, `"span_id":"`) {
					return true
				}
			}
			return false
		})
	}
	found := false
	for _, line := range strings.Split(s.stackLog(), "\n") {
		if strings.Contains(line, `"msg":"webhook stored"`) && strings.Contains(line, "evt_trace_credit") {
			require.Contains(t, line, `"trace_id":"`+creditTrace+`"`, "the credit's log line carries its trace id")
			found = true
		}
	}
	require.True(t, found, "webhook-api logged the credit")
}

// isDB matches a Postgres span (otelpgx).
func isDB(sp telemetrytest.Span) bool {
	return sp.Attrs["db.system"] == "postgresql" || sp.Attrs["db.system.name"] == "postgresql"
}

// storedTrace returns the trace id of the traceparent stored with the one
// outbox row matching where.
func storedTrace(t *testing.T, s *suite, where string) string {
	t.Helper()
	var tp string
	require.NoError(t, s.db.Pool.QueryRow(context.Background(),
		`SELECT coalesce(headers->>'traceparent', '') FROM `+published.All+` o WHERE `+where).Scan(&tp))
	return traceIDOf(t, tp)
}

// traceIDOf parses a W3C traceparent (version-traceid-spanid-flags).
func traceIDOf(t *testing.T, traceparent string) string {
	t.Helper()
	parts := strings.Split(traceparent, "-")
	require.Len(t, parts, 4, "traceparent %q", traceparent)
	require.Len(t, parts[1], 32, "traceparent %q", traceparent)
	return parts[1]
}

// trace is the spans of one trace id.
type trace []telemetrytest.Span

func (tr trace) find(service string, match func(telemetrytest.Span) bool) *telemetrytest.Span {
	for i := range tr {
		if tr[i].Service == service && match(tr[i]) {
			return &tr[i]
		}
	}
	return nil
}

func (tr trace) hasServices(want ...string) error {
	have := map[string]int{}
	for _, sp := range tr {
		have[sp.Service]++
	}
	for _, w := range want {
		if have[w] == 0 {
			return fmt.Errorf("no span from %s (have %v)", w, have)
		}
	}
	return nil
}

// connected checks the trace is one tree: a single root, and every other
// span's parent is in it.
func (tr trace) connected() error {
	ids := map[string]bool{}
	for _, sp := range tr {
		ids[sp.SpanID] = true
	}
	roots := 0
	for _, sp := range tr {
		switch {
		case sp.ParentID == "" || sp.ParentID == "0000000000000000":
			roots++
		case !ids[sp.ParentID]:
			return fmt.Errorf("%s span %q has parent %s, not in the trace (yet)", sp.Service, sp.Name, sp.ParentID)
		}
	}
	if roots != 1 {
		return fmt.Errorf("%d roots", roots)
	}
	return nil
}

// tree renders a trace as indented "service: name" lines, for failures
// and for the report.
func (tr trace) tree() string {
	children := map[string][]telemetrytest.Span{}
	for _, sp := range tr {
		children[sp.ParentID] = append(children[sp.ParentID], sp)
	}
	var b strings.Builder
	var walk func(parent string, depth int)
	walk = func(parent string, depth int) {
		kids := children[parent]
		sort.SliceStable(kids, func(i, j int) bool { return kids[i].Service < kids[j].Service })
		for _, sp := range kids {
			events := ""
			if len(sp.Events) > 0 {
				events = " [" + strings.Join(sp.Events, ", ") + "]"
			}
			fmt.Fprintf(&b, "%s%s: %s%s\n", strings.Repeat("  ", depth), sp.Service, sp.Name, events)
			walk(sp.SpanID, depth+1)
		}
	}
	walk("", 0)
	return b.String()
}

// waitTrace waits until the spans of trace id satisfy check, and logs the
// trace's tree.
func waitTrace(t *testing.T, rcv *telemetrytest.Receiver, what, id string, check func(trace) error) {
	t.Helper()
	spans := func() trace {
		var tr trace
		for _, sp := range rcv.Spans() {
			if sp.TraceID == id {
				tr = append(tr, sp)
			}
		}
		return tr
	}
	if !assert.Eventually(t, func() bool { return check(spans()) == nil }, 30*time.Second, 200*time.Millisecond) {
		tr := spans()
		t.Fatalf("%s trace %s: %v\n%s", what, id, check(tr), tr.tree())
	}
	tr := spans()
	t.Logf("%s trace %s (%d spans):\n%s", what, id, len(tr), tr.tree())
}
