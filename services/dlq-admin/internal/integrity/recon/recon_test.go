package recon_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/recon"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// receiver records the alerter's structured ALERT log lines (its only
// output; what pages is AegisReconciliationDiscrepancy on
// aegis_reconciliation_discrepancies) as key, severity, summary and
// details (the line's other attributes).
type receiver struct {
	mu     sync.Mutex
	alerts []map[string]any
}

// Write takes one JSON log line (slog's handler writes a line a call).
func (r *receiver) Write(p []byte) (int, error) {
	var line map[string]any
	if json.Unmarshal(p, &line) != nil {
		return len(p), nil // not a line of the alerter's
	}
	msg, _ := line["msg"].(string)
	summary, ok := strings.CutPrefix(msg, "ALERT: ")
	if !ok {
		return len(p), nil
	}
	a := map[string]any{"key": line["alert_key"], "severity": line["severity"], "summary": summary, "runbook": line["runbook"]}
	for _, k := range []string{"time", "level", "msg", "component", "alert_key", "severity", "alert_rule", "runbook"} {
		delete(line, k)
	}
	a["details"] = line
	r.mu.Lock()
	r.alerts = append(r.alerts, a)
	r.mu.Unlock()
	return len(p), nil
}

func (r *receiver) got() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.alerts...)
}

type bundle struct {
	db      *pgtest.DB
	rec     *recon.Reconciler
	reg     *prometheus.Registry
	hook    *receiver
	alerter *alert.Alerter
}

// setup runs a real Alerter whose log lines the receiver records.
func setup(t *testing.T) *bundle {
	t.Helper()
	db := pgtest.New(t)
	hook := &receiver{}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	reg := prometheus.NewRegistry()
	alerter, err := alert.New(alert.Config{Source: "dlq-admin"}, lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(hook, nil)),
		Registerer: reg, Clock: time.Now})
	require.NoError(t, err)
	rec, err := recon.New(db.Pool, alerter, lifecycle.Deps{Logger: logger, Registerer: reg, Clock: time.Now})
	require.NoError(t, err)
	return &bundle{db: db, rec: rec, reg: reg, hook: hook, alerter: alerter}
}

// wallet returns the id of a wallet, creating it.
func (b *bundle) wallet(t *testing.T, kind, owner string) int64 {
	t.Helper()
	return fixture.Wallet{Kind: kind, Owner: owner}.Insert(t, b.db.Pool)
}

// credit moves amount from the PSP clearing account to user's wallet the
// way the ledger does: one balanced transaction, the user balance kept.
func (b *bundle) credit(t *testing.T, user string, amount int64, ref string) {
	t.Helper()
	fixture.Credit(user, amount, ref).Insert(t, b.db.Pool)
}

func (b *bundle) criticals(t *testing.T) float64 {
	t.Helper()
	families, err := b.reg.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() != "aegis_alerts_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == recon.AlertKey && labels["severity"] == "critical" {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

func TestHealthyLedgerIsOK(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.rec.Latest(ctx)
	require.ErrorIs(t, err, recon.ErrNoRun)

	b.credit(t, "alice", 5000, "pi_1")
	b.credit(t, "bob", 700, "pi_2")
	b.credit(t, "alice", 300, "pi_3")
	b.wallet(t, "user", "carol") // no entries, balance 0: fine
	run, err := b.rec.Run(ctx, recon.TriggerManual, "ops")
	require.NoError(t, err)
	require.True(t, run.OK)
	s := run.Summary
	require.Equal(t, int64(3), s.Transactions)
	require.Equal(t, int64(6), s.Entries)
	require.Equal(t, int64(3), s.UserWallets)
	require.Zero(t, s.Discrepancies())
	require.Empty(t, s.Wallets)
	require.Equal(t, []recon.Account{{Owner: "psp_clearing:stripe", Currency: "usd", Balance: -6000}}, s.SystemAccounts)
	require.Zero(t, b.criticals(t))
	require.Equal(t, 0.0, gaugeValue(t, b.reg, "aegis_reconciliation_discrepancies"))

	latest, err := b.rec.Latest(ctx)
	require.NoError(t, err)
	require.Equal(t, run.ID, latest.ID)
	require.Equal(t, "ops", *latest.Actor)
	require.Equal(t, s, latest.Summary)
}

func TestDiscrepancyRaisesOneCriticalAlertNamingTheWallet(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.credit(t, "alice", 5000, "pi_1")
	b.credit(t, "bob", 700, "pi_2")
	// Someone edits a balance by hand.
	_, err := b.db.Pool.Exec(ctx, `UPDATE wallets SET balance = balance + 1 WHERE kind = 'user' AND owner = 'alice'`)
	require.NoError(t, err)

	run, err := b.rec.Run(ctx, recon.TriggerScheduled, "")
	require.NoError(t, err)
	require.False(t, run.OK)
	require.Nil(t, run.Actor)
	require.Equal(t, int64(1), run.Summary.WalletMismatches)
	require.Zero(t, run.Summary.NegativeWallets)
	require.Equal(t, []recon.WalletProblem{{Owner: "alice", Currency: "usd", Stored: 5001, Computed: 5000, Problems: []string{"balance_mismatch"}}},
		run.Summary.Wallets)

	require.Eventually(t, func() bool { return len(b.hook.got()) >= 1 }, 30*time.Second, 10*time.Millisecond)
	got := b.hook.got()
	require.Len(t, got, 1, "one discrepancy, one alert")
	require.Equal(t, "critical", got[0]["severity"])
	require.Equal(t, recon.AlertKey, got[0]["key"])
	require.Equal(t, "docs/runbooks/AegisReconciliationDiscrepancy.md", got[0]["runbook"])
	require.Contains(t, got[0]["summary"], "alice/usd stored=5001 computed=5000")
	require.Equal(t, 1.0, b.criticals(t))
	require.Equal(t, 1.0, gaugeValue(t, b.reg, "aegis_reconciliation_discrepancies"))

	// Stored as a failed run naming the wallet.
	var ok bool
	var summary map[string]any
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT ok, summary FROM reconciliation_runs WHERE id = $1`, run.ID).Scan(&ok, &summary))
	require.False(t, ok)
	wallets := summary["wallets"].([]any)
	require.Equal(t, "alice", wallets[0].(map[string]any)["owner"])
}

func TestUnbalancedAndNegativeAreFound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.credit(t, "alice", 100, "pi_1")
	user := b.wallet(t, "user", "dave")
	clearing := b.wallet(t, "system", "psp_clearing:stripe")
	// What the database's own guards refuse, forced past them: a one-sided
	// entry, and a user wallet whose entries go negative.
	_, err := b.db.Pool.Exec(ctx, `ALTER TABLE ledger_entries DISABLE TRIGGER ledger_entries_balanced`)
	require.NoError(t, err)
	var lonely string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `INSERT INTO ledger_transactions (kind, reference) VALUES ('manual', 'x1') RETURNING id`).Scan(&lonely))
	_, err = b.db.Pool.Exec(ctx, `INSERT INTO ledger_entries (transaction_id, wallet_id, amount, currency) VALUES ($1, $2, 42, 'usd')`, lonely, clearing)
	require.NoError(t, err)
	var neg string
	require.NoError(t, b.db.Pool.QueryRow(ctx, `INSERT INTO ledger_transactions (kind, reference) VALUES ('manual', 'x2') RETURNING id`).Scan(&neg))
	_, err = b.db.Pool.Exec(ctx, `INSERT INTO ledger_entries (transaction_id, wallet_id, amount, currency) VALUES ($1, $2, -30, 'usd'), ($1, $3, 30, 'usd')`,
		neg, user, clearing)
	require.NoError(t, err)

	run, err := b.rec.Run(ctx, recon.TriggerManual, "ops")
	require.NoError(t, err)
	require.False(t, run.OK)
	require.Equal(t, int64(1), run.Summary.UnbalancedTransactions)
	require.Equal(t, []recon.Unbalanced{{TransactionID: lonely, Currency: "usd", Sum: 42}}, run.Summary.Unbalanced)
	require.Equal(t, int64(1), run.Summary.WalletMismatches)
	require.Equal(t, int64(1), run.Summary.NegativeWallets)
	require.Equal(t, []recon.WalletProblem{{Owner: "dave", Currency: "usd", Stored: 0, Computed: -30, Problems: []string{"balance_mismatch", "negative"}}},
		run.Summary.Wallets)
	require.Equal(t, int64(3), run.Summary.Discrepancies())
	require.Eventually(t, func() bool { return len(b.hook.got()) == 1 }, 30*time.Second, 10*time.Millisecond)
	require.Contains(t, b.hook.got()[0]["summary"], "dave/usd")
	require.Contains(t, b.hook.got()[0]["details"].(map[string]any)["transactions"], lonely+" usd sum=42")
}

func TestScheduleRunsTheCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// Two replicas' clients: each inserts the scheduled job (unique by
	// period), so the check runs once.
	var stops []func()
	for range 2 {
		workers := river.NewWorkers()
		river.AddWorker(workers, recon.NewWorker(b.rec, jobs.Kinds{}))
		r, err := jobs.New(b.db.Pool, jobs.Config{Name: "recon-test", Workers: workers,
			Queues:    map[string]river.QueueConfig{recon.Queue: {MaxWorkers: 1}},
			Schedules: []jobs.Schedule{recon.Schedule(time.Hour)},
			FetchPoll: 20 * time.Millisecond}, lifecycle.Deps{Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		require.NoError(t, r.Start(ctx))
		var once sync.Once
		stop := func() { once.Do(func() { require.NoError(t, r.Stop(ctx)) }) }
		t.Cleanup(stop)
		stops = append(stops, stop)
	}
	require.Eventually(t, func() bool {
		_, err := b.rec.Latest(context.Background())
		return err == nil
	}, 30*time.Second, 10*time.Millisecond)
	// Stopped, the replicas' leaders, enqueuers and workers are done: every
	// run they were going to make is in the table now.
	for _, stop := range stops {
		stop()
	}
	run, err := b.rec.Latest(context.Background())
	require.NoError(t, err)
	require.Equal(t, recon.TriggerScheduled, run.Trigger)
	require.True(t, run.OK)
	var audits int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log`).Scan(&audits))
	require.Zero(t, audits, "only operator actions are audited")
	var runs int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM reconciliation_runs`).Scan(&runs))
	require.Equal(t, 1, runs, "one check per period across replicas")
	var scheduled int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1`, recon.ScheduledArgs{}.Kind()).Scan(&scheduled))
	require.Equal(t, 1, scheduled, "one scheduled job across replicas, none left unworked")
}

// gaugeValue reads a registered, label-less gauge.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not registered", name)
	return 0
}

// payoutWithHold posts a payout's hold (and optionally its release) the
// way the payout worker's ledger does, and sets the payout's status.
func (b *bundle) payoutWithHold(t *testing.T, id, user string, status payoutstate.Status, amount int64, release bool) {
	t.Helper()
	fixture.Payout{ID: id, UserID: user, Amount: amount, Status: status}.Insert(t, b.db.Pool)
	fixture.Hold(id, user, amount).Insert(t, b.db.Pool)
	if release {
		fixture.Posting{Kind: fixture.LedgerRelease, Reference: id, From: fixture.System(fixture.PayoutHolds),
			To: fixture.User(user), Amount: amount}.Insert(t, b.db.Pool)
	}
}

// A finished payout whose hold was never paid out nor given back is a
// discrepancy; one still in flight, or released, is not.
func TestFinishedPayoutWithAHoldLeftIsFlagged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.credit(t, "alice", 5000, "pi_1")
	b.payoutWithHold(t, "0193a9c8-0000-7000-8000-0000000000a1", "alice", payoutstate.Finalized, 700, false)
	b.payoutWithHold(t, "0193a9c8-0000-7000-8000-0000000000a2", "alice", payoutstate.Finalized, 300, true)
	b.payoutWithHold(t, "0193a9c8-0000-7000-8000-0000000000a3", "alice", payoutstate.NeedsReview, 200, false)

	run, err := b.rec.Run(ctx, recon.TriggerManual, "ops")
	require.NoError(t, err)
	require.False(t, run.OK)
	require.Equal(t, int64(1), run.Summary.OpenHolds)
	require.Equal(t, []recon.OpenHold{{PayoutID: "0193a9c8-0000-7000-8000-0000000000a1", Status: "FINALIZED", Currency: "usd", Held: 700}},
		run.Summary.Holds)
	// The holds account is off by the same money: it holds the 200 of
	// the payout in review and the 700 nobody holds any more.
	require.Equal(t, []recon.AccountMismatch{{Owner: "payout_holds", Currency: "usd", Expected: 200, Actual: 900}}, run.Summary.AccountProblems)
	require.Equal(t, int64(2), run.Summary.Discrepancies())
	require.Eventually(t, func() bool { return len(b.hook.got()) == 1 }, 30*time.Second, 10*time.Millisecond)
	require.Contains(t, b.hook.got()[0]["summary"], "1 finished payout(s) with a hold not zero")
}

// Checks run one at a time: while one holds the lock, another answers
// ErrBusy (409 on the API) instead of running beside it.
func TestOnlyOneCheckRunsAtATime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT pg_advisory_xact_lock(1701002, 1)`)
	require.NoError(t, err)
	_, err = b.rec.Run(ctx, recon.TriggerManual, "ops")
	require.ErrorIs(t, err, recon.ErrBusy)
	require.NoError(t, tx.Rollback(ctx))
	run, err := b.rec.Run(ctx, recon.TriggerManual, "ops")
	require.NoError(t, err)
	require.True(t, run.OK)
}

// A check that cannot finish in time fails instead of holding its snapshot
// (and a connection) open without end.
func TestCheckStatementsHaveATimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.rec.WithStatementTimeout(200 * time.Millisecond)
	tx, err := b.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `LOCK TABLE ledger_entries IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	_, err = b.rec.Run(ctx, recon.TriggerManual, "ops") // returns while the table is still locked
	require.Error(t, err)
	require.Contains(t, err.Error(), "statement timeout")
}
