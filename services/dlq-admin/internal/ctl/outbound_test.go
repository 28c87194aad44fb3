package ctl_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/ctl"
)

// TestAegisctlManagesOutboundEndpoints drives the real dlq-admin binary
// through every endpoints, messages and deliveries command and checks the
// rows each one changed; the relay's messages and deliveries are inserted
// as the relay would.
func TestAegisctlManagesOutboundEndpoints(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	cluster := kafkatest.NewCluster(t)
	bin := proctest.Build(t, t.TempDir(), "github.com/aegis-payments/aegis/services/dlq-admin", false)
	port := proctest.FreePort(t)
	base := "http://" + proctest.Addr(port)
	proc := proctest.Start(t, "dlq-admin", bin, map[string]string{
		"DATABASE_URL":              db.URL,
		"HTTP_ADDR":                 proctest.Addr(port),
		"KAFKA_BROKERS":             strings.Join(cluster.ListenAddrs(), ","),
		"DLQ_ADMIN_TOKENS":          "ops:operator:" + operatorToken + ",eve:viewer:" + viewerToken,
		"OUTBOUND_ROTATION_OVERLAP": "2h",
	})
	proctest.WaitHTTP(t, base+"/healthz", 60*time.Second, proc)
	ctx := context.Background()
	count := func(q string, args ...any) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, q, args...).Scan(&n))
		return n
	}
	ok := func(r result) result {
		t.Helper()
		require.Equal(t, ctl.ExitOK, r.code, "stdout %s\nstderr %s", r.stdout, r.stderr)
		return r
	}

	// Create: the table shows the secret once.
	r := ok(cli(t, base, operatorToken, "endpoints", "create", "--url", "https://hooks.example.com/aegis", "--description", "ledger",
		"--event-types", "payout.*,refund.posted", "--rate-limit", "5"))
	secret := regexp.MustCompile(`secret: (whsec_\S+)`).FindStringSubmatch(r.stdout)
	require.NotNil(t, secret, r.stdout)
	var id string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT id::text FROM outbound_endpoints WHERE secret = $1 AND rate_limit = 5
		AND event_types = '{payout.*,refund.posted}' AND created_by = 'ops'`, secret[1]).Scan(&id))
	require.Equal(t, ctl.ExitAuth, cli(t, base, viewerToken, "endpoints", "create", "--url", "https://x.example.com").code)
	r = cli(t, base, operatorToken, "endpoints", "create", "--url", "http://hooks.example.com/plain")
	require.Equal(t, ctl.ExitUsage, r.code, "https only in production: %s", r.stderr)
	require.Contains(t, r.stderr, "url")
	require.Equal(t, ctl.ExitUsage, cli(t, base, operatorToken, "endpoints", "create").code, "--url is required")

	// List and get.
	r = ok(cli(t, base, operatorToken, "endpoints", "list"))
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, r.stdout)
	require.Contains(t, lines[0], "HEALTH")
	require.Regexp(t, id+`\s+https://hooks.example.com/aegis\s+payout.\*,refund.posted\s+5/s\s+healthy\s+0`, lines[1])
	require.NotContains(t, r.stdout, "whsec_")
	r = ok(cli(t, base, viewerToken, "endpoints", "list"))
	require.Contains(t, r.stdout, "https://hooks.example.com/…", "a viewer reads the URL redacted")
	require.NotContains(t, r.stdout, "/aegis")
	r = ok(cli(t, base, viewerToken, "--output", "json", "endpoints", "get", id))
	require.Equal(t, "ledger", r.json(t)["description"])
	require.Equal(t, ctl.ExitNotFound, cli(t, base, viewerToken, "endpoints", "get", "5b0f0c52-8c43-4c8a-9a35-1f8f0f1e1a11").code)
	require.Equal(t, ctl.ExitUsage, cli(t, base, viewerToken, "endpoints", "get", "nope").code)

	// Update: only what is given; none clears.
	ok(cli(t, base, operatorToken, "endpoints", "update", id, "--rate-limit", "none", "--legacy-secret", "legacy-secret-0123456789"))
	require.Equal(t, 1, count(`SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND rate_limit IS NULL
		AND legacy_secret = 'legacy-secret-0123456789' AND description = 'ledger'`, id))
	ok(cli(t, base, operatorToken, "endpoints", "update", id, "--legacy-secret", "none", "--event-types", ""))
	require.Equal(t, 1, count(`SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND legacy_secret IS NULL AND event_types = '{}'`, id))
	require.Equal(t, ctl.ExitUsage, cli(t, base, operatorToken, "endpoints", "update", id, "--event-types", "payout.nope").code)
	require.Equal(t, ctl.ExitUsage, cli(t, base, operatorToken, "endpoints", "update", id).code, "nothing to change")

	// Disable, enable.
	require.Equal(t, ctl.ExitUsage, cli(t, base, operatorToken, "endpoints", "disable", id).code, "--reason is required")
	r = ok(cli(t, base, operatorToken, "endpoints", "disable", id, "--reason", "receiver migrating"))
	require.Contains(t, r.stdout, "disabled")
	require.Equal(t, 1, count(`SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND NOT enabled AND disabled_by = 'ops'
		AND disabled_reason = 'receiver migrating'`, id))
	ok(cli(t, base, operatorToken, "endpoints", "enable", id))
	require.Equal(t, 1, count(`SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND enabled AND disabled_at IS NULL`, id))

	// Secret, rotation.
	require.Equal(t, ctl.ExitAuth, cli(t, base, viewerToken, "endpoints", "secret", id).code)
	r = ok(cli(t, base, operatorToken, "endpoints", "secret", id))
	require.Contains(t, r.stdout, "secret: "+secret[1])
	r = ok(cli(t, base, operatorToken, "endpoints", "rotate-secret", id, "--reason", "yearly"))
	require.Contains(t, r.stdout, "previous secret signs until")
	require.Equal(t, 1, count(`SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND previous_secret = $2 AND secret <> $2
		AND previous_secret_expires_at BETWEEN now() + interval '119 minutes' AND now() + interval '2 hours'`, id, secret[1]))
	require.Equal(t, ctl.ExitUsage, cli(t, base, operatorToken, "endpoints", "rotate-secret", id, "--secret", "whsec_x").code)

	// The relay's messages: one delivered, one failed, one never delivered.
	since := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	msg := func(eventID, typ string, seq int64) int64 {
		var m int64
		require.NoError(t, db.Pool.QueryRow(ctx, `
			INSERT INTO outbound_messages (event_id, event_type, user_id, sequence, occurred_at, body, created_at)
			VALUES ($1, $2, 'user-7', $3, $4, convert_to('{"event_id":"' || $1 || '"}', 'UTF8'), $4) RETURNING id`,
			eventID, typ, seq, since.Add(time.Duration(seq)*time.Minute)).Scan(&m))
		return m
	}
	delivery := func(m int64, state string) int64 {
		var d int64
		require.NoError(t, db.Pool.QueryRow(ctx, `
			INSERT INTO outbound_deliveries (message_id, endpoint_id, state, attempts, last_attempt_at, last_status, finished_at)
			VALUES ($1, $2, $3, 1, now(), 503, now()) RETURNING id`, m, id, state).Scan(&d))
		_, err := db.Pool.Exec(ctx, `INSERT INTO outbound_attempts (delivery_id, message_id, endpoint_id, attempt, attempted_at, outcome,
			status_code, latency_ms, error) VALUES ($1, $2, $3, 1, now(), $4, 503, 40, 'upstream busy')`,
			d, m, id, map[string]string{"succeeded": "delivered", "failed": "failed"}[state])
		require.NoError(t, err)
		return d
	}
	m1, m2, m3 := msg("ev-1", "payout.succeeded", 1), msg("ev-2", "payout.failed", 2), msg("ev-3", "refund.posted", 3)
	d1, d2 := delivery(m1, "succeeded"), delivery(m2, "failed")

	r = ok(cli(t, base, viewerToken, "endpoints", "deliveries", id, "--state", "failed"))
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, r.stdout)
	require.Regexp(t, fmt.Sprintf(`^%d\s+%d\s+%s\s+failed\s+1\s+-\s+\S+\s+503`, d2, m2, id), lines[1])
	r = ok(cli(t, base, viewerToken, "endpoints", "attempts", id, "--limit", "1"))
	require.Contains(t, r.stdout, "upstream busy")
	require.Contains(t, r.stderr, "more: --before-id")

	// Recover since: the failed one and the one never delivered.
	require.Equal(t, ctl.ExitUsage, cli(t, base, operatorToken, "endpoints", "recover", id).code)
	r = ok(cli(t, base, operatorToken, "endpoints", "recover", id, "--since", since.Format(time.RFC3339), "--reason", "outage"))
	require.Contains(t, r.stdout, "scheduled 2 deliveries")
	require.Equal(t, 2, count(`SELECT count(*) FROM outbound_deliveries WHERE endpoint_id = $1 AND state = 'pending' AND attempts = 0
		AND message_id = ANY($2)`, id, []int64{m2, m3}))

	// Re-sends.
	require.Equal(t, ctl.ExitRefused, cli(t, base, operatorToken, "deliveries", "resend", fmt.Sprint(d1)).code, "a succeeded delivery")
	require.Equal(t, ctl.ExitAuth, cli(t, base, viewerToken, "deliveries", "resend", fmt.Sprint(d2)).code)
	ok(cli(t, base, operatorToken, "deliveries", "resend", fmt.Sprint(d2), "--reason", "again"))
	r = ok(cli(t, base, operatorToken, "messages", "resend", fmt.Sprint(m1), "--endpoint", id))
	require.Regexp(t, fmt.Sprintf(`%d\s+%d\s+%s\s+pending\s+0`, d1, m1, id), r.stdout)
	require.Equal(t, 1, count(`SELECT count(*) FROM outbound_deliveries WHERE id = $1 AND state = 'pending'`, d1))
	require.Equal(t, ctl.ExitUsage, cli(t, base, operatorToken, "messages", "resend", fmt.Sprint(m1)).code, "--endpoint is required")

	// Messages.
	r = ok(cli(t, base, viewerToken, "messages", "list", "--event-type", "payout.failed"))
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, r.stdout)
	require.Regexp(t, fmt.Sprintf(`^%d\s+ev-2\s+payout.failed\s+user-7\s+2`, m2), lines[1])
	r = ok(cli(t, base, viewerToken, "--output", "json", "messages", "list", "--limit", "2"))
	require.Len(t, r.json(t)["items"], 2)
	require.Equal(t, float64(m2), r.json(t)["next_before_id"])
	r = ok(cli(t, base, viewerToken, "messages", "get", fmt.Sprint(m1)))
	require.Contains(t, r.stdout, `"event_id": "ev-1"`)
	require.Contains(t, r.stdout, "upstream busy", "each delivery's attempts")

	// Delete.
	ok(cli(t, base, operatorToken, "endpoints", "delete", id, "--reason", "shop closed"))
	require.Equal(t, 1, count(`SELECT count(*) FROM outbound_endpoints WHERE id = $1 AND deleted_at IS NOT NULL`, id))
	require.Equal(t, ctl.ExitNotFound, cli(t, base, viewerToken, "endpoints", "get", id).code)
	require.Equal(t, 11, count(`SELECT count(*) FROM audit_log WHERE actor = 'ops' AND target_type IN ('outbound_endpoint', 'outbound_delivery', 'outbound_message')`),
		"create, update ×2, disable, enable, secret, rotate, recover, two re-sends, delete")
}
