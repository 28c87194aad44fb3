package ctl_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/ctl"
)

const secondOperatorToken = "second-operator-token-0123456789"

// TestAegisctlResolvesPayoutsWithFourEyes drives the real dlq-admin binary
// with REQUIRE_SECOND_APPROVER=true: list the payouts in review, resolve
// one, have a second operator approve it, read the resolution.
func TestAegisctlResolvesPayoutsWithFourEyes(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	cluster := kafkatest.NewCluster(t)
	bin := proctest.Build(t, t.TempDir(), "github.com/aegis-payments/aegis/services/dlq-admin", false)
	port := proctest.FreePort(t)
	base := "http://" + proctest.Addr(port)
	proc := proctest.Start(t, "dlq-admin", bin, map[string]string{
		"DATABASE_URL":            db.URL,
		"HTTP_ADDR":               proctest.Addr(port),
		"KAFKA_BROKERS":           strings.Join(cluster.ListenAddrs(), ","),
		"DLQ_ADMIN_TOKENS":        "ops:operator:" + operatorToken + ",sam:operator:" + secondOperatorToken + ",eve:viewer:" + viewerToken,
		"REQUIRE_SECOND_APPROVER": "true",
	})
	proctest.WaitHTTP(t, base+"/healthz", 60*time.Second, proc)
	ctx := context.Background()
	payout := func(status string, created time.Time) string {
		return fixture.Payout{ClientID: "shop", UserID: "user-7", Status: payoutstate.Status(status),
			LastError: "psp_missing: the PSP has no object", CreatedAt: created}.Insert(t, db.Pool)
	}
	count := func(q string, args ...any) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, q, args...).Scan(&n))
		return n
	}
	done := payout("SUCCEEDED", time.Now().Add(-time.Hour))
	review := payout("NEEDS_REVIEW", time.Now())

	r := cli(t, base, viewerToken, "payouts", "list")
	require.Equal(t, ctl.ExitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 3, r.stdout)
	require.Contains(t, lines[0], "PSP OBJECT")
	require.Contains(t, lines[1], review, "NEEDS_REVIEW first")
	require.Contains(t, lines[1], "psp_missing")
	require.Contains(t, lines[2], done)

	for _, args := range [][]string{
		{"payouts", "resolve", review, "--reason", "r", "--evidence", "po_1"},
		{"payouts", "resolve", review, "--paid", "--failed", "--reason", "r", "--evidence", "po_1"},
		{"payouts", "resolve", review, "--failed", "--evidence", "po_1"},
		{"payouts", "resolve", review, "--failed", "--reason", "r"},
	} {
		r := cli(t, base, operatorToken, args...)
		require.Equal(t, ctl.ExitUsage, r.code, "%v: %s", args, r.stderr)
	}
	r = cli(t, base, viewerToken, "payouts", "resolve", review, "--failed", "--reason", "r", "--evidence", "po_1")
	require.Equal(t, ctl.ExitAuth, r.code, r.stderr)
	r = cli(t, base, operatorToken, "payouts", "resolve", done, "--failed", "--reason", "r", "--evidence", "po_1")
	require.Equal(t, ctl.ExitRefused, r.code, "409: not in review: %s", r.stderr)
	require.Contains(t, r.stderr, "SUCCEEDED")

	r = cli(t, base, operatorToken, "payouts", "resolve", review, "--failed", "--reason", "dashboard: account closed", "--evidence", "po_1Abc")
	require.Equal(t, ctl.ExitOK, r.code, r.stderr)
	m := regexp.MustCompile(`aegisctl approvals approve (\d+)`).FindStringSubmatch(r.stdout)
	require.Len(t, m, 2, r.stdout)
	approval := m[1]
	require.Zero(t, count(`SELECT count(*) FROM transaction_outbox`), "nothing sent before approval")

	r = cli(t, base, viewerToken, "approvals", "list")
	require.Equal(t, ctl.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "payout_resolution")
	require.Contains(t, r.stdout, review)

	r = cli(t, base, operatorToken, "approvals", "approve", approval)
	require.Equal(t, ctl.ExitAuth, r.code, "the requester cannot approve: %s", r.stderr)
	r = cli(t, base, secondOperatorToken, "approvals", "approve", approval, "--reason", "checked too")
	require.Equal(t, ctl.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "approved by sam")
	require.Equal(t, 1, count(`SELECT count(*) FROM transaction_outbox WHERE event_type = 'payout.resolution'
		AND partition_key = 'user-7' AND payload->>'payout_id' = $1`, review))
	r = cli(t, base, secondOperatorToken, "approvals", "approve", approval)
	require.Equal(t, ctl.ExitRefused, r.code, r.stderr)
	r = cli(t, base, viewerToken, "approvals", "show", approval)
	require.Equal(t, ctl.ExitOK, r.code, r.stderr)
	require.Regexp(t, `status\s+approved`, r.stdout)
	require.Regexp(t, `decided by\s+sam`, r.stdout)
	require.Regexp(t, `decision reason\s+checked too`, r.stdout)
	require.Equal(t, ctl.ExitNotFound, cli(t, base, viewerToken, "approvals", "show", "999999").code)
	r = cli(t, base, viewerToken, "approvals", "list", "--status", "approved", "--limit", "1", "-o", "yaml")
	require.Equal(t, ctl.ExitOK, r.code, r.stderr)
	var approvals struct {
		Items []struct {
			ID        int64  `yaml:"id"`
			DecidedBy string `yaml:"decided_by"`
		} `yaml:"items"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &approvals), r.stdout)
	require.Len(t, approvals.Items, 1)
	require.Equal(t, approval, strconv.FormatInt(approvals.Items[0].ID, 10))
	require.Equal(t, "sam", approvals.Items[0].DecidedBy)

	var rid string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT id::text FROM payout_resolutions WHERE payout_id = $1`, review).Scan(&rid))
	r = cli(t, base, viewerToken, "resolutions", "show", rid)
	require.Equal(t, ctl.ExitOK, r.code, r.stderr)
	require.Regexp(t, `status\s+pending`, r.stdout)
	r = cli(t, base, viewerToken, "resolutions", "list", "--payout-id", review)
	require.Equal(t, ctl.ExitOK, r.code, r.stderr)
	lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2, r.stdout)
	require.Regexp(t, rid+`\s+failed\s+pending\s+ops\s+sam\s+po_1Abc`, lines[1])
	require.Equal(t, ctl.ExitUsage, cli(t, base, viewerToken, "resolutions", "list").code, "--payout-id is required")

	// The payout itself, read-only: where it stands and how it got there.
	r = cli(t, base, viewerToken, "payouts", "show", review)
	require.Equal(t, ctl.ExitOK, r.code, r.stderr)
	require.Regexp(t, `status\s+NEEDS_REVIEW`, r.stdout)
	require.Regexp(t, `last error\s+psp_missing: the PSP has no object`, r.stdout)
	require.Contains(t, r.stdout, "transitions:")
	require.Contains(t, r.stdout, "calls to the PSP:")
	r = cli(t, base, viewerToken, "payouts", "show", review, "-o", "json")
	require.Equal(t, ctl.ExitOK, r.code, r.stderr)
	require.Equal(t, review, r.json(t)["id"])
	require.Equal(t, ctl.ExitNotFound, cli(t, base, viewerToken, "payouts", "show", "5b0f0c52-8c43-4c8a-9a35-1f8f0f1e1a11").code)
	// payout-worker's verdict: the PSP disagreed.
	fixture.Verdict{ResolutionID: rid, Status: "refused", PSPAnswer: "the PSP says paid"}.Insert(t, db.Pool)
	r = cli(t, base, viewerToken, "resolutions", "show", rid)
	require.Equal(t, ctl.ExitUnhealthy, r.code, r.stderr)
	require.Contains(t, r.stdout, "the PSP says paid")
	r = cli(t, base, viewerToken, "resolutions", "show", rid, "-o", "json")
	require.Equal(t, ctl.ExitUnhealthy, r.code, "refused is exit 6 whatever the output")
	require.Equal(t, "refused", r.json(t)["status"])
}
