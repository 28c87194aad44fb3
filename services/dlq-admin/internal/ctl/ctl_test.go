package ctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/ctl"
)

const (
	operatorToken = "operator-token-0123456789"
	viewerToken   = "viewer-token-0123456789"
)

type result struct {
	code           int
	stdout, stderr string
}

// cli runs aegisctl with args against base, the token in AEGISCTL_TOKEN.
func cli(t *testing.T, base, token string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	env := map[string]string{"AEGISCTL_URL": base, "AEGISCTL_TOKEN": token, "HOME": t.TempDir()}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := ctl.Main(ctx, ctl.IO{Args: args, Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return env[k] }})
	return result{code, out.String(), errOut.String()}
}

func (r result) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &m), r.stdout)
	return m
}

// TestAegisctlAgainstARunningDLQAdmin drives the real dlq-admin binary, fed
// by dead letters on Kafka, through every aegisctl command, and checks what
// changed in the store.
func TestAegisctlAgainstARunningDLQAdmin(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	cluster := kafkatest.NewCluster(t)
	bin := proctest.Build(t, t.TempDir(), "github.com/aegis-payments/aegis/services/dlq-admin", false)
	port := proctest.FreePort(t)
	base := "http://" + proctest.Addr(port)
	proc := proctest.Start(t, "dlq-admin", bin, map[string]string{
		"DATABASE_URL":     db.URL,
		"HTTP_ADDR":        proctest.Addr(port),
		"KAFKA_BROKERS":    strings.Join(cluster.ListenAddrs(), ","),
		"DLQ_ADMIN_TOKENS": "ops:operator:" + operatorToken + ",eve:viewer:" + viewerToken,
		"REPLAY_RATE":      "1000",
	})
	proctest.WaitHTTP(t, base+"/healthz", 60*time.Second, proc)

	// Five letters through Kafka, as the services publish them.
	producer := kafkatest.NewClient(t, cluster)
	now := time.Now()
	for i, l := range []struct{ topic, class, err string }{
		{kafkax.TopicTransactions, "permanent", "stripe account_invalid"},
		{kafkax.TopicTransactions, "permanent", "stripe account_invalid"},
		{kafkax.TopicTransactions, "permanent", "stripe account_invalid"},
		{kafkax.TopicWebhookPending, "transient", "postgres: connection refused"},
		{kafkax.TopicWebhookPending, "transient", "postgres: connection refused"},
	} {
		p, o := int32(0), int64(i)
		rec, err := dlq.Letter{Source: dlq.SourceConsumer, OriginalTopic: l.topic, OriginalPartition: &p, OriginalOffset: &o,
			PartitionKey: fmt.Sprintf("user-%d", i), ConsumerGroup: "payout-worker",
			Payload: []byte(`{"user_id":"user-1","card_number":"4000056655665556","email":"ada@example.com"}`),
			Error:   l.err, ErrorClass: l.class, FirstFailureAt: now, FailedAt: now}.Record()
		require.NoError(t, err)
		require.NoError(t, producer.ProduceSync(context.Background(), rec).FirstErr())
	}
	require.Eventually(t, func() bool {
		r := cli(t, base, viewerToken, "--output", "json", "dead-letters", "list")
		return r.code == 0 && len(r.json(t)["items"].([]any)) == 5
	}, 30*time.Second, 50*time.Millisecond)

	count := func(q string, args ...any) int {
		var n int
		require.NoError(t, db.Pool.QueryRow(context.Background(), q, args...).Scan(&n))
		return n
	}
	idsOf := func(class string) []int64 {
		rows, err := db.Pool.Query(context.Background(), `SELECT id FROM dead_letters WHERE error_class = $1 ORDER BY id`, class)
		require.NoError(t, err)
		defer rows.Close()
		var ids []int64
		for rows.Next() {
			var id int64
			require.NoError(t, rows.Scan(&id))
			ids = append(ids, id)
		}
		return ids
	}
	permanent, transient := idsOf("permanent"), idsOf("transient")
	require.Len(t, permanent, 3)

	t.Run("list", func(t *testing.T) {
		r := cli(t, base, viewerToken, "dead-letters", "list", "--error-class", "permanent")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Len(t, lines, 4, r.stdout)
		require.Contains(t, lines[0], "CLASS")
		require.Contains(t, lines[1], "stripe account_invalid")

		r = cli(t, base, viewerToken, "--output", "json", "dead-letters", "list", "--limit", "2", "--all")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Len(t, r.json(t)["items"], 5, "--all follows the cursor over three pages")
		// Flags after the command, the global ones too.
		r = cli(t, base, viewerToken, "dead-letters", "list", "--limit", "2", "--all", "-o", "json")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Len(t, r.json(t)["items"], 5)
		r = cli(t, base, viewerToken, "dead-letters", "list", "--error-class", "permanent", "-o", "yaml")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		var page struct {
			Items []struct {
				ID         int64  `yaml:"id"`
				ErrorClass string `yaml:"error_class"`
			} `yaml:"items"`
			NextCursor string `yaml:"next_cursor"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &page), r.stdout)
		require.Len(t, page.Items, 3, r.stdout)
		require.Equal(t, "permanent", page.Items[0].ErrorClass)
		require.Empty(t, page.NextCursor)

		// By user (the partition key): one letter.
		r = cli(t, base, viewerToken, "--output", "json", "dead-letters", "list", "--user", "user-3")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		items := r.json(t)["items"].([]any)
		require.Len(t, items, 1)
		require.Equal(t, "user-3", items[0].(map[string]any)["partition_key"])

		// Grouped: three account_invalid, two connection refused.
		r = cli(t, base, viewerToken, "dead-letters", "groups")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		lines = strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Len(t, lines, 3, r.stdout)
		require.Regexp(t, `^3\s+permanent\s.*stripe account_invalid$`, lines[1])
		require.Regexp(t, `^2\s+transient\s.*postgres: connection refused$`, lines[2])

		r = cli(t, base, viewerToken, "dead-letters", "stats")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "aegis.transactions")
		require.Regexp(t, `all\s+5\s+0\s+0`, r.stdout)
	})

	t.Run("whoami", func(t *testing.T) {
		r := cli(t, base, viewerToken, "whoami")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Equal(t, "eve (viewer)\n", r.stdout)
		r = cli(t, base, operatorToken, "whoami", "-o", "json")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Equal(t, map[string]any{"name": "ops", "role": "operator"}, r.json(t))
	})

	t.Run("show redacts for a viewer", func(t *testing.T) {
		r := cli(t, base, viewerToken, "dead-letters", "show", fmt.Sprint(permanent[0]))
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "payload (redacted):")
		require.Contains(t, r.stdout, "user-1")
		require.NotContains(t, r.stdout, "4000056655665556")
		require.NotContains(t, r.stdout, "ada@example.com")
	})

	t.Run("exit codes", func(t *testing.T) {
		r := cli(t, base, viewerToken, "dead-letters", "replay", fmt.Sprint(permanent[0]))
		require.Equal(t, ctl.ExitAuth, r.code, "a viewer cannot replay")
		require.Contains(t, r.stderr, "403 forbidden")
		require.Equal(t, ctl.ExitAuth, cli(t, base, "wrong-token-0123456789", "dead-letters", "stats").code)
		r = cli(t, base, "", "dead-letters", "stats")
		require.Equal(t, ctl.ExitUsage, r.code)
		require.Contains(t, r.stderr, "AEGISCTL_TOKEN")
		require.Equal(t, ctl.ExitNotFound, cli(t, base, viewerToken, "dead-letters", "show", "999999").code)
		require.Equal(t, ctl.ExitUsage, cli(t, base, viewerToken, "dead-letters", "show", "x").code)
		require.Equal(t, ctl.ExitUsage, cli(t, base, viewerToken, "dead-letters", "list", "--since", "yesterday").code, "a 400 is a usage error")
		require.Equal(t, ctl.ExitUsage, cli(t, base, viewerToken, "payouts", "frobnicate").code, "an unknown command")
		require.Equal(t, ctl.ExitError, cli(t, "http://127.0.0.1:1", viewerToken, "dead-letters", "stats").code)
		require.Zero(t, count(`SELECT count(*) FROM transaction_outbox`), "nothing was written by refused commands")
	})

	t.Run("replay and discard", func(t *testing.T) {
		r := cli(t, base, operatorToken, "dead-letters", "replay", fmt.Sprint(transient[0]), "--reason", "postgres is back")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "replayed")
		require.Equal(t, 1, count(`SELECT count(*) FROM transaction_outbox WHERE topic = $1`, kafkax.TopicWebhookPending))
		r = cli(t, base, operatorToken, "dead-letters", "replay", fmt.Sprint(transient[0]))
		require.Equal(t, ctl.ExitRefused, r.code, "already replayed: 409")

		// A payout already FINALIZED: the replay publishes nothing and says so.
		payoutID := fixture.Payout{ClientID: "shop", IdempotencyKey: "k1", UserID: "user-9", Status: payoutstate.Finalized}.Insert(t, db.Pool)
		p, o := int32(0), int64(100)
		done, _, err := dlq.Insert(context.Background(), db.Pool, dlq.Letter{Source: dlq.SourceConsumer,
			OriginalTopic: kafkax.TopicTransactions, OriginalPartition: &p, OriginalOffset: &o, PartitionKey: "user-9",
			Payload: fmt.Appendf(nil, `{"payout_id":%q,"user_id":"user-9"}`, payoutID), Error: "x", ErrorClass: "permanent"})
		require.NoError(t, err)
		before := count(`SELECT count(*) FROM transaction_outbox`)
		r = cli(t, base, operatorToken, "dead-letters", "replay", fmt.Sprint(done))
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "no-op: nothing published: payout "+payoutID+" is already FINALIZED")
		require.Equal(t, before, count(`SELECT count(*) FROM transaction_outbox`))

		r = cli(t, base, operatorToken, "dead-letters", "discard", fmt.Sprint(transient[1]))
		require.Equal(t, ctl.ExitUsage, r.code, "a discard needs a reason")
		r = cli(t, base, operatorToken, "dead-letters", "discard", fmt.Sprint(transient[1]), "--reason", "duplicate of a settled event")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Equal(t, 1, count(`SELECT count(*) FROM dead_letters WHERE id = $1 AND status = 'discarded'
			AND resolution_reason = 'duplicate of a settled event' AND resolved_by = 'ops'`, transient[1]))
	})

	t.Run("bulk replay shows the count first and follows the job", func(t *testing.T) {
		r := cli(t, base, operatorToken, "dead-letters", "bulk-replay", "--max", "10", "--error-class", "permanent")
		require.Equal(t, ctl.ExitUsage, r.code, "without --yes only the dry run")
		require.Contains(t, r.stdout, "dry run: 3 open letters match, 3 would be replayed")
		require.Contains(t, r.stderr, "--yes")
		require.Equal(t, 3, count(`SELECT count(*) FROM dead_letters WHERE error_class = 'permanent' AND status = 'open'`))

		r = cli(t, base, operatorToken, "dead-letters", "bulk-replay", "--max", "10", "--error-class", "permanent",
			"--reason", "account fixed", "--yes", "--follow", "--interval", "100ms")
		require.Equal(t, ctl.ExitOK, r.code, r.stdout+r.stderr)
		require.Contains(t, r.stderr, "[##############################] 100% 3/3  replayed 3")
		require.Regexp(t, `job \d+ done: 3 matched, 3 replayed, 0 skipped, 0 failed`, r.stdout)
		require.Zero(t, count(`SELECT count(*) FROM dead_letters WHERE error_class = 'permanent' AND status = 'open'`))
		require.Equal(t, 3, count(`SELECT count(*) FROM transaction_outbox WHERE topic = $1`, kafkax.TopicTransactions))

		r = cli(t, base, viewerToken, "jobs", "list")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "account fixed")
		// What the job did with each letter.
		r = cli(t, base, viewerToken, "jobs", "letters", "1")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Len(t, lines, 4, r.stdout)
		require.Regexp(t, fmt.Sprintf(`^%d\s+republished\s+\d+`, permanent[0]), lines[1])
		r = cli(t, base, viewerToken, "jobs", "letters", "1", "--limit", "2", "--all", "-o", "json")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Len(t, r.json(t)["items"], 3, "--all pages with --after")
		r = cli(t, base, viewerToken, "jobs", "letters", "1", "--after", fmt.Sprint(permanent[1]), "-o", "json")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Len(t, r.json(t)["items"], 1)
		require.Equal(t, ctl.ExitNotFound, cli(t, base, viewerToken, "jobs", "letters", "999").code)
		r = cli(t, base, operatorToken, "--output", "json", "jobs", "show", "1")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Equal(t, "done", r.json(t)["status"])
		require.Equal(t, ctl.ExitRefused, cli(t, base, operatorToken, "jobs", "cancel", "1").code, "a finished job cannot be cancelled")

		r = cli(t, base, operatorToken, "dead-letters", "bulk-replay", "--max", "10", "--yes")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stderr, "nothing to replay")
	})

	t.Run("bulk discard shows the count first", func(t *testing.T) {
		var junk []int64
		for i := range 3 {
			p, o := int32(0), int64(200+i)
			id, _, err := dlq.Insert(context.Background(), db.Pool, dlq.Letter{Source: dlq.SourceConsumer,
				OriginalTopic: kafkax.TopicWebhookPending, OriginalPartition: &p, OriginalOffset: &o, PartitionKey: "user-junk",
				Payload: []byte(`{"user_id":"user-junk"}`), Error: "duplicate event", ErrorClass: "junk"})
			require.NoError(t, err)
			junk = append(junk, id)
		}
		open := func() int {
			return count(`SELECT count(*) FROM dead_letters WHERE error_class = 'junk' AND status = 'open'`)
		}
		r := cli(t, base, operatorToken, "dead-letters", "bulk-discard", "--error-class", "junk", "--max", "10")
		require.Equal(t, ctl.ExitUsage, r.code, "without --yes only the dry run")
		require.Contains(t, r.stdout, "dry run: 3 open letters match, 3 would be discarded")
		require.Contains(t, r.stderr, "--yes")
		r = cli(t, base, operatorToken, "dead-letters", "bulk-discard", "--error-class", "junk", "--max", "10", "--dry-run", "-o", "yaml")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		var preview struct {
			DryRun    bool    `yaml:"dry_run"`
			Discarded int     `yaml:"discarded"`
			IDs       []int64 `yaml:"ids"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &preview), r.stdout)
		require.True(t, preview.DryRun)
		require.Equal(t, 3, preview.Discarded)
		require.Equal(t, junk, preview.IDs)
		require.Equal(t, ctl.ExitUsage, cli(t, base, operatorToken, "dead-letters", "bulk-discard", "--error-class", "junk",
			"--max", "10", "--yes").code, "--yes needs --reason")
		require.Equal(t, ctl.ExitUsage, cli(t, base, operatorToken, "dead-letters", "bulk-discard", "--error-class", "junk").code,
			"--max or --ids")
		require.Equal(t, ctl.ExitAuth, cli(t, base, viewerToken, "dead-letters", "bulk-discard", "--error-class", "junk",
			"--max", "10", "--dry-run").code)
		require.Equal(t, 3, open())

		r = cli(t, base, operatorToken, "dead-letters", "bulk-discard", "--ids", fmt.Sprintf("%d,%d", junk[0], junk[1]),
			"--reason", "duplicates", "--yes")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, fmt.Sprintf("discarded 2 letters (ids: %d, %d)", junk[0], junk[1]))
		require.Equal(t, 1, open())
		require.Equal(t, 2, count(`SELECT count(*) FROM dead_letters WHERE error_class = 'junk' AND status = 'discarded'
			AND resolution_reason = 'duplicates' AND resolved_by = 'ops'`))
	})

	t.Run("psp reconciliation", func(t *testing.T) {
		r := cli(t, base, viewerToken, "psp-reconciliation", "show")
		require.Equal(t, ctl.ExitNotFound, r.code, "no run yet: %s", r.stderr)
		require.Equal(t, ctl.ExitAuth, cli(t, base, viewerToken, "psp-reconciliation", "run").code)
		r = cli(t, base, operatorToken, "psp-reconciliation", "run")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		m := regexp.MustCompile(`PSP reconciliation (\d+) requested`).FindStringSubmatch(r.stdout)
		require.Len(t, m, 2, r.stdout)
		id := m[1]
		require.Equal(t, ctl.ExitRefused, cli(t, base, operatorToken, "psp-reconciliation", "run").code, "one at a time")
		r = cli(t, base, viewerToken, "psp-reconciliation", "show")
		require.Equal(t, ctl.ExitOK, r.code, "requested, not finished: %s", r.stderr)
		require.Contains(t, r.stdout, "PSP reconciliation "+id+" (manual by ops")
		require.Contains(t, r.stdout, "REQUESTED")

		// webhook-api works it and finds a disagreement.
		_, err := db.Pool.Exec(context.Background(), `
			UPDATE psp_reconciliation_runs SET status = 'succeeded', started_at = now(), finished_at = now(), events_found = 3,
			       events_recovered = 1, events_present = 2, disagreement_count = 1, disagreements_open = 1,
			       disagreements = '[{"provider":"stripe","kind":"paid_at_psp_not_succeeded","payout_id":"p1","detail":"paid at Stripe","state":"new"}]'
			WHERE id = $1`, id)
		require.NoError(t, err)
		for _, args := range [][]string{{"psp-reconciliation", "show"}, {"psp-reconciliation", "show", id}} {
			r = cli(t, base, viewerToken, args...)
			require.Equal(t, ctl.ExitUnhealthy, r.code, "a disagreement is exit 6: %s", r.stderr)
			require.Contains(t, r.stdout, "1 DISAGREEMENTS")
			require.Contains(t, r.stdout, "3 events found, 1 recovered, 2 present")
			require.Regexp(t, `stripe\s+paid_at_psp_not_succeeded\s+new\s+p1\s+.*paid at Stripe`, r.stdout)
		}
		r = cli(t, base, viewerToken, "psp-reconciliation", "show", id, "-o", "json")
		require.Equal(t, ctl.ExitUnhealthy, r.code)
		require.Equal(t, "succeeded", r.json(t)["status"])
		require.Equal(t, ctl.ExitNotFound, cli(t, base, viewerToken, "psp-reconciliation", "show", "999999").code)
		require.Equal(t, ctl.ExitUsage, cli(t, base, viewerToken, "psp-reconciliation", "show", "x").code)

		r = cli(t, base, viewerToken, "psp-reconciliation", "disagreements")
		require.Equal(t, ctl.ExitOK, r.code, "none open: %s", r.stderr)
		runID, err := strconv.ParseInt(id, 10, 64)
		require.NoError(t, err)
		fixture.Disagreement{Kind: "paid_at_psp_not_succeeded", PayoutID: "p1", Detail: "paid at Stripe", FirstSeenRun: runID}.Insert(t, db.Pool)
		r = cli(t, base, viewerToken, "psp-reconciliation", "disagreements")
		require.Equal(t, ctl.ExitUnhealthy, r.code, r.stderr)
		require.Regexp(t, `stripe\s+paid_at_psp_not_succeeded\s+p1\s+.*\s+`+id+`\s+.*paid at Stripe`, r.stdout)
		r = cli(t, base, viewerToken, "psp-reconciliation", "disagreements", "-o", "yaml")
		require.Equal(t, ctl.ExitUnhealthy, r.code)
		var open struct {
			Items []map[string]any `yaml:"items"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &open), r.stdout)
		require.Len(t, open.Items, 1)
		require.Equal(t, "p1", open.Items[0]["payout_id"])
	})

	t.Run("reconciliation", func(t *testing.T) {
		// dlq-admin runs a scheduled check when its River leader starts
		// (RunOnStart), at a moment of River's choosing: wait for it
		// rather than race it.
		require.Eventually(t, func() bool {
			return count(`SELECT count(*) FROM reconciliation_runs WHERE trigger = 'scheduled'`) == 1
		}, 30*time.Second, 50*time.Millisecond, "the scheduled check at start")
		r := cli(t, base, viewerToken, "reconciliation", "show")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Regexp(t, `reconciliation \d+ \(scheduled, finished [^)]+\): OK`, r.stdout)
		// The next scheduled one is a period (24h) away: with the record
		// gone there is no run to show.
		_, err := db.Pool.Exec(context.Background(), `DELETE FROM reconciliation_runs`)
		require.NoError(t, err)
		r = cli(t, base, viewerToken, "reconciliation", "show")
		require.Equal(t, ctl.ExitNotFound, r.code, "no run recorded")

		r = cli(t, base, operatorToken, "reconciliation", "run")
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, ": OK")

		_, err = db.Pool.Exec(context.Background(), `INSERT INTO wallets (kind, owner, currency, balance) VALUES ('user', 'mallory', 'usd', 5)`)
		require.NoError(t, err)
		r = cli(t, base, operatorToken, "reconciliation", "run")
		require.Equal(t, ctl.ExitUnhealthy, r.code, "a discrepancy is exit 6 for scripts")
		require.Contains(t, r.stdout, "DISCREPANCY")
		require.Regexp(t, `mallory\s+usd\s+5\s+0\s+balance_mismatch`, r.stdout)

		// What a system account holds money for, where it disagrees: an
		// owed with nothing in receivables behind it.
		_, err = db.Pool.Exec(context.Background(), `UPDATE wallets SET owed = 7 WHERE kind = 'user' AND owner = 'mallory'`)
		require.NoError(t, err)
		r = cli(t, base, operatorToken, "reconciliation", "run")
		require.Equal(t, ctl.ExitUnhealthy, r.code)
		require.Regexp(t, `receivables\s+user mallory owes\s+usd\s+7\s+0`, r.stdout)
		require.Regexp(t, `receivables\s+account total\s+usd\s+-7\s+0`, r.stdout)
	})

	t.Run("config file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "config")
		require.NoError(t, os.WriteFile(file, []byte("# ops\nurl = "+base+"\ntoken = "+viewerToken+"\n"), 0o644))
		var out, errOut bytes.Buffer
		code := ctl.Main(context.Background(), ctl.IO{Args: []string{"--config", file, "dead-letters", "stats"},
			Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }})
		require.Equal(t, ctl.ExitOK, code, errOut.String())
		require.Contains(t, errOut.String(), "readable by others")
		require.NotContains(t, out.String()+errOut.String(), viewerToken, "the token is never printed")
	})
}
