package recon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dbgauge"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/recon/sqlcdb"
)

// what is the part of dlq-admin this package's errors are marked with.
const what = "the ledger integrity check"

// Triggers of a run.
const (
	TriggerScheduled = "scheduled"
	TriggerManual    = "manual"
)

// AlertKey is the key of the discrepancy alert (pkg/alert's: what pages is
// AegisReconciliationDiscrepancy on aegis_reconciliation_discrepancies).
const AlertKey = alert.ReconciliationKey

// MaxListed is how many offending transactions and wallets a run names.
const MaxListed = 100

// alertListed is how many of them the alert names.
const alertListed = 10

// The audit action and target type a check writes.
const (
	ActionReconcile      = "reconcile"
	TargetReconciliation = "reconciliation"
)

// ErrNoRun means no check has run yet.
var ErrNoRun = errors.New("no reconciliation has run yet")

// ErrBusy means another check is running (here or on another replica):
// checks run one at a time.
var ErrBusy = errors.New("a reconciliation is already running")

// DefaultStatementTimeout bounds each statement of a check unless
// WithStatementTimeout says otherwise.
const DefaultStatementTimeout = time.Minute

// Raiser is what discrepancies are alerted through: *alert.Alerter.
type Raiser interface {
	Raise(ctx context.Context, a alert.Alert)
}

// Summary is what one run found. It is stored as reconciliation_runs.summary
// and returned by the API as it is.
type Summary struct {
	Transactions  int64 `json:"transactions"`
	Entries       int64 `json:"entries"`
	UserWallets   int64 `json:"user_wallets"`
	SystemWallets int64 `json:"system_wallets"`
	// UnbalancedTransactions counts (transaction, currency) pairs whose
	// entries do not sum to zero; Unbalanced names the first MaxListed.
	UnbalancedTransactions int64        `json:"unbalanced_transactions"`
	Unbalanced             []Unbalanced `json:"unbalanced"`
	// WalletMismatches counts user wallets whose stored balance is not the
	// sum of their entries; NegativeWallets those below zero either way.
	// Wallets names the first MaxListed of both.
	WalletMismatches int64           `json:"wallet_mismatches"`
	NegativeWallets  int64           `json:"negative_wallets"`
	Wallets          []WalletProblem `json:"wallets"`
	// OpenHolds counts finished payouts whose hold is not zero in the payout
	// holds account; Holds names the first MaxListed.
	OpenHolds int64      `json:"open_holds"`
	Holds     []OpenHold `json:"holds"`
	// HoldMismatches counts unfinished payouts whose share of the payout
	// holds account is not what their state says (the amount while the
	// money is held, else zero); HeldPayouts names the first MaxListed.
	HoldMismatches int64        `json:"hold_mismatches"`
	HeldPayouts    []PayoutHold `json:"held_payouts"`
	// DisputeMismatches counts disputes whose share of the disputes account
	// is not the disputed amount while open, zero once closed; Disputes
	// names the first MaxListed.
	DisputeMismatches int64          `json:"dispute_mismatches"`
	Disputes          []DisputeShare `json:"disputes"`
	// ReceivableMismatches counts users whose owed is not their share of
	// the receivables account; Receivables names the first MaxListed.
	ReceivableMismatches int64            `json:"receivable_mismatches"`
	Receivables          []UserReceivable `json:"receivables"`
	// AccountMismatches counts (system account, currency) pairs whose
	// balance is not what the rest of the database says it must be:
	// receivables = −Σ owed, disputes = Σ open disputes, payout holds = Σ
	// of the payouts holding money. AccountProblems names them all.
	AccountMismatches int64             `json:"account_mismatches"`
	AccountProblems   []AccountMismatch `json:"account_problems"`
	// SystemAccounts are the sums of the system accounts, for information.
	SystemAccounts []Account `json:"system_accounts"`
}

// Unbalanced is one transaction whose entries in one currency do not sum
// to zero.
type Unbalanced struct {
	TransactionID string `json:"transaction_id"`
	Currency      string `json:"currency"`
	Sum           int64  `json:"sum"`
}

// WalletProblem is one user wallet that fails the check.
type WalletProblem struct {
	Owner    string   `json:"owner"`
	Currency string   `json:"currency"`
	Stored   int64    `json:"stored"`
	Computed int64    `json:"computed"`
	Problems []string `json:"problems"`
}

// OpenHold is a finished payout whose hold account share is not zero.
type OpenHold struct {
	PayoutID string `json:"payout_id"`
	Status   string `json:"status"`
	Currency string `json:"currency"`
	Held     int64  `json:"held"`
}

// PayoutHold is an unfinished payout whose share of the payout holds
// account (Actual) is not what its state says (Expected).
type PayoutHold struct {
	PayoutID string `json:"payout_id"`
	UserID   string `json:"user_id"`
	Status   string `json:"status"`
	Currency string `json:"currency"`
	Expected int64  `json:"expected"`
	Actual   int64  `json:"actual"`
}

// DisputeShare is a dispute ("provider:dispute id") whose share of the
// disputes account (Actual) is not what its state says (Expected).
type DisputeShare struct {
	Dispute  string `json:"dispute"`
	UserID   string `json:"user_id"`
	Currency string `json:"currency"`
	State    string `json:"state"`
	Expected int64  `json:"expected"`
	Actual   int64  `json:"actual"`
}

// UserReceivable is a user whose owed on the wallet row (Owed) is not what
// their share of the receivables account says they owe (LedgerOwed).
type UserReceivable struct {
	UserID     string `json:"user_id"`
	Currency   string `json:"currency"`
	Owed       int64  `json:"owed"`
	LedgerOwed int64  `json:"ledger_owed"`
}

// AccountMismatch is a system account whose balance (Actual) is not what
// the rest of the database says (Expected).
type AccountMismatch struct {
	Owner    string `json:"owner"`
	Currency string `json:"currency"`
	Expected int64  `json:"expected"`
	Actual   int64  `json:"actual"`
}

// Account is a system account's balance: the sum of its entries.
type Account struct {
	Owner    string `json:"owner"`
	Currency string `json:"currency"`
	Balance  int64  `json:"balance"`
}

// Discrepancies is the number of problems found.
func (s Summary) Discrepancies() int64 {
	return s.UnbalancedTransactions + s.WalletMismatches + s.NegativeWallets + s.OpenHolds +
		s.HoldMismatches + s.DisputeMismatches + s.ReceivableMismatches + s.AccountMismatches
}

// Run is one stored check.
type Run struct {
	ID         int64
	StartedAt  time.Time
	FinishedAt time.Time
	OK         bool
	Trigger    string
	Actor      *string
	Summary    Summary
}

// Reconciler runs the check.
type Reconciler struct {
	pool    *pgxpool.Pool
	raiser  Raiser
	logger  *slog.Logger
	now     func() time.Time
	runs    *prometheus.CounterVec
	figures *dbgauge.Collector // the latest stored run's gauges (metrics.go)
	// stmtTimeout bounds each statement of a check.
	stmtTimeout time.Duration
}

// WithStatementTimeout sets the bound on each statement of a check
// (RECONCILE_STATEMENT_TIMEOUT); d <= 0 keeps the default.
func (r *Reconciler) WithStatementTimeout(d time.Duration) *Reconciler {
	if d > 0 {
		r.stmtTimeout = d
	}
	return r
}

// New returns a Reconciler and registers its metrics on deps.Registerer.
func New(pool *pgxpool.Pool, raiser Raiser, deps lifecycle.Deps) (*Reconciler, error) {
	deps = deps.WithDefaults()
	logger, reg, now := deps.Logger, deps.Registerer, deps.Clock
	r := &Reconciler{
		pool: pool, raiser: raiser, logger: logger.With("component", "reconciliation"), now: now,
		stmtTimeout: DefaultStatementTimeout,
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_reconciliation_runs_total",
			Help: "Ledger integrity checks by result (ok, discrepancy, error).",
		}, []string{"result"}),
	}
	r.figures = r.latestGauges()
	for _, c := range []prometheus.Collector{r.figures, r.runs} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register reconciliation metrics: %w", err)
		}
	}
	return r, nil
}

// Run checks the ledger now, stores the run and alerts on a discrepancy.
// actor is the token name of a manual run ("" for a scheduled one). It
// answers ErrBusy while another check runs.
func (r *Reconciler) Run(ctx context.Context, trigger, actor string) (_ Run, err error) {
	defer fault.Mark(&err, what)
	run, err := r.run(ctx, trigger, actor, true)
	if err != nil && !errors.Is(err, ErrBusy) {
		r.runs.WithLabelValues("error").Inc()
	}
	return run, err
}

func (r *Reconciler) run(ctx context.Context, trigger, actor string, exclusive bool) (Run, error) {
	run := Run{StartedAt: r.now(), Trigger: trigger}
	if actor != "" {
		run.Actor = &actor
	}
	sum, err := r.check(ctx, exclusive)
	if err != nil {
		return Run{}, err
	}
	run.Summary, run.FinishedAt, run.OK = sum, r.now(), sum.Discrepancies() == 0

	body, err := json.Marshal(sum)
	if err != nil {
		return Run{}, fmt.Errorf("encode reconciliation summary: %w", err)
	}
	err = database.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		id, err := sqlcdb.New(tx).InsertRun(ctx, sqlcdb.InsertRunParams{StartedAt: run.StartedAt, FinishedAt: run.FinishedAt,
			OK: run.OK, Trigger: trigger, Actor: actor, Summary: body})
		run.ID = id
		if err != nil {
			return fmt.Errorf("store reconciliation run: %w", err)
		}
		if trigger != TriggerManual {
			return nil
		}
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: ActionReconcile, TargetType: TargetReconciliation,
			TargetID: audit.ID(run.ID), At: run.FinishedAt, Detail: map[string]any{"ok": run.OK, "discrepancies": sum.Discrepancies()}})
	})
	if err != nil {
		return Run{}, err
	}

	if run.OK {
		r.runs.WithLabelValues("ok").Inc()
		r.logger.InfoContext(ctx, "ledger reconciliation ok", "run_id", run.ID, "trigger", trigger,
			"transactions", sum.Transactions, "user_wallets", sum.UserWallets)
		return run, nil
	}
	r.runs.WithLabelValues("discrepancy").Inc()
	r.raiser.Raise(ctx, discrepancyAlert(run))
	return run, nil
}

// check reads the ledger in one consistent snapshot.
func (r *Reconciler) check(ctx context.Context, exclusive bool) (Summary, error) {
	tx, err := r.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return Summary{}, fmt.Errorf("reconciliation: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	q := sqlcdb.New(tx)
	if err := q.StatementTimeout(ctx, strconv.FormatInt(r.stmtTimeout.Milliseconds(), 10)); err != nil {
		return Summary{}, fmt.Errorf("reconciliation: statement timeout: %w", err)
	}
	if exclusive {
		locked, err := q.TryLock(ctx)
		if err != nil {
			return Summary{}, fmt.Errorf("reconciliation: lock: %w", err)
		}
		if !locked {
			return Summary{}, ErrBusy
		}
	}
	s := Summary{Unbalanced: []Unbalanced{}, Wallets: []WalletProblem{}, Holds: []OpenHold{}, SystemAccounts: []Account{},
		HeldPayouts: []PayoutHold{}, Disputes: []DisputeShare{}, Receivables: []UserReceivable{}, AccountProblems: []AccountMismatch{}}
	c, err := q.Counts(ctx)
	if err != nil {
		return Summary{}, fmt.Errorf("reconciliation: count: %w", err)
	}
	s.Transactions, s.Entries, s.UserWallets, s.SystemWallets = c.Transactions, c.Entries, c.UserWallets, c.SystemWallets

	unbalanced, err := q.Unbalanced(ctx, MaxListed)
	if err != nil {
		return Summary{}, fmt.Errorf("reconciliation: transactions: %w", err)
	}
	for _, u := range unbalanced {
		s.Unbalanced = append(s.Unbalanced, Unbalanced{TransactionID: u.TransactionID, Currency: u.Currency, Sum: u.Sum})
		s.UnbalancedTransactions = u.Total
	}

	wallets, err := q.UserWallets(ctx, MaxListed)
	if err != nil {
		return Summary{}, fmt.Errorf("reconciliation: wallets: %w", err)
	}
	for _, row := range wallets {
		w := WalletProblem{Owner: row.Owner, Currency: row.Currency, Stored: row.Balance, Computed: row.Computed, Problems: []string{}}
		if row.Mismatch {
			w.Problems = append(w.Problems, "balance_mismatch")
		}
		if row.Negative {
			w.Problems = append(w.Problems, "negative")
		}
		s.Wallets = append(s.Wallets, w)
		s.WalletMismatches, s.NegativeWallets = row.Mismatches, row.Negatives
	}

	holds, err := q.OpenHolds(ctx, sqlcdb.OpenHoldsParams{Closed: payoutstate.Names(payoutstate.Status.Closed), MaxRows: MaxListed})
	if err != nil {
		return Summary{}, fmt.Errorf("reconciliation: payout holds: %w", err)
	}
	for _, h := range holds {
		s.Holds = append(s.Holds, OpenHold{PayoutID: h.PayoutID, Status: h.Status, Currency: h.Currency, Held: h.Held})
		s.OpenHolds = h.Total
	}

	if err := checkShares(ctx, q, &s); err != nil {
		return Summary{}, err
	}

	accounts, err := q.SystemAccounts(ctx)
	if err != nil {
		return Summary{}, fmt.Errorf("reconciliation: system accounts: %w", err)
	}
	for _, a := range accounts {
		s.SystemAccounts = append(s.SystemAccounts, Account{Owner: a.Owner, Currency: a.Currency, Balance: a.Balance})
	}
	return s, nil
}

// checkShares checks each system account against what it holds money for
// (docs/reference/accounting.md): each unfinished payout's hold, each dispute, each
// user's receivable, and each account's total.
func checkShares(ctx context.Context, q *sqlcdb.Queries, s *Summary) error {
	holds, err := q.UnfinishedHolds(ctx, sqlcdb.UnfinishedHoldsParams{Unheld: payoutstate.Names(unheld), Reviewable: payoutstate.Names(payoutstate.Status.Reviewable), MaxRows: MaxListed})
	if err != nil {
		return fmt.Errorf("reconciliation: holds of unfinished payouts: %w", err)
	}
	for _, h := range holds {
		s.HeldPayouts = append(s.HeldPayouts, PayoutHold{PayoutID: h.PayoutID, UserID: h.UserID, Status: h.Status,
			Currency: h.Currency, Expected: h.Expected, Actual: h.Actual})
		s.HoldMismatches = h.Total
	}
	disputes, err := q.OpenDisputes(ctx, MaxListed)
	if err != nil {
		return fmt.Errorf("reconciliation: disputes: %w", err)
	}
	for _, d := range disputes {
		s.Disputes = append(s.Disputes, DisputeShare{Dispute: d.Dispute, UserID: d.UserID, Currency: d.Currency,
			State: d.State, Expected: d.Expected, Actual: d.Actual})
		s.DisputeMismatches = d.Total
	}
	receivables, err := q.UserReceivables(ctx, MaxListed)
	if err != nil {
		return fmt.Errorf("reconciliation: receivables: %w", err)
	}
	for _, r := range receivables {
		s.Receivables = append(s.Receivables, UserReceivable{UserID: r.UserID, Currency: r.Currency, Owed: r.Owed, LedgerOwed: r.LedgerOwed})
		s.ReceivableMismatches = r.Total
	}
	totals, err := q.AccountTotals(ctx)
	if err != nil {
		return fmt.Errorf("reconciliation: system account totals: %w", err)
	}
	for _, a := range totals {
		s.AccountProblems = append(s.AccountProblems, AccountMismatch{Owner: a.Owner, Currency: a.Currency, Expected: a.Expected, Actual: a.Actual})
	}
	s.AccountMismatches = int64(len(totals))
	return nil
}

// discrepancyAlert names what is wrong: one alert per run.
func discrepancyAlert(run Run) alert.Alert {
	s := run.Summary
	var wallets, txs []string
	for i, w := range s.Wallets {
		if i == alertListed {
			break
		}
		wallets = append(wallets, fmt.Sprintf("%s/%s stored=%d computed=%d (%s)", w.Owner, w.Currency, w.Stored, w.Computed, strings.Join(w.Problems, ",")))
	}
	for i, u := range s.Unbalanced {
		if i == alertListed {
			break
		}
		txs = append(txs, fmt.Sprintf("%s %s sum=%d", u.TransactionID, u.Currency, u.Sum))
	}
	var parts []string
	if s.WalletMismatches > 0 {
		parts = append(parts, fmt.Sprintf("%d wallet balance(s) differ from their entries", s.WalletMismatches))
	}
	if s.NegativeWallets > 0 {
		parts = append(parts, fmt.Sprintf("%d negative wallet(s)", s.NegativeWallets))
	}
	if s.UnbalancedTransactions > 0 {
		parts = append(parts, fmt.Sprintf("%d unbalanced transaction(s)", s.UnbalancedTransactions))
	}
	var holds []string
	for i, h := range s.Holds {
		if i == alertListed {
			break
		}
		holds = append(holds, fmt.Sprintf("%s %s held=%d %s", h.PayoutID, h.Status, h.Held, h.Currency))
	}
	if s.OpenHolds > 0 {
		parts = append(parts, fmt.Sprintf("%d finished payout(s) with a hold not zero", s.OpenHolds))
	}
	shares := shareProblems(s)
	if s.HoldMismatches > 0 {
		parts = append(parts, fmt.Sprintf("%d unfinished payout(s) whose hold is not what their state says", s.HoldMismatches))
	}
	if s.DisputeMismatches > 0 {
		parts = append(parts, fmt.Sprintf("%d dispute(s) whose share of the disputes account is not what their state says", s.DisputeMismatches))
	}
	if s.ReceivableMismatches > 0 {
		parts = append(parts, fmt.Sprintf("%d user(s) whose owed is not their share of receivables", s.ReceivableMismatches))
	}
	if s.AccountMismatches > 0 {
		parts = append(parts, fmt.Sprintf("%d system account(s) whose balance is not what they hold money for", s.AccountMismatches))
	}
	summary := "ledger reconciliation failed: " + strings.Join(parts, ", ")
	if len(wallets) > 0 {
		summary += "; wallets: " + strings.Join(wallets, "; ")
	}
	if len(shares) > 0 {
		summary += "; " + strings.Join(shares, "; ")
	}
	return alert.Alert{
		Key:      AlertKey,
		Severity: alert.Critical,
		Summary:  summary,
		Details: map[string]any{
			"run_id": run.ID, "wallet_mismatches": s.WalletMismatches, "negative_wallets": s.NegativeWallets,
			"unbalanced_transactions": s.UnbalancedTransactions, "wallets": wallets, "transactions": txs,
			"open_holds": s.OpenHolds, "holds": holds,
			"hold_mismatches": s.HoldMismatches, "dispute_mismatches": s.DisputeMismatches,
			"receivable_mismatches": s.ReceivableMismatches, "account_mismatches": s.AccountMismatches,
			"disagreements": shares,
		},
	}
}

// Latest returns the latest stored run, or ErrNoRun.
func (r *Reconciler) Latest(ctx context.Context) (_ Run, err error) {
	defer fault.Mark(&err, what)
	row, err := sqlcdb.New(r.pool).LatestRun(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, ErrNoRun
	}
	if err != nil {
		return Run{}, fmt.Errorf("latest reconciliation run: %w", err)
	}
	run := Run{ID: row.ID, StartedAt: row.StartedAt, FinishedAt: row.FinishedAt, OK: row.OK, Trigger: row.Trigger, Actor: row.Actor}
	if err := json.Unmarshal(row.Summary, &run.Summary); err != nil {
		return Run{}, fmt.Errorf("decode reconciliation run %d: %w", run.ID, err)
	}
	return run, nil
}

// shareProblems names, for the alert, the first alertListed disagreements
// of each kind that checkShares found: which account, which payout,
// dispute or user, expected against actual.
func shareProblems(s Summary) []string {
	var out []string
	for i, h := range s.HeldPayouts {
		if i == alertListed {
			break
		}
		out = append(out, fmt.Sprintf("payout_holds: payout %s (user %s, %s) expected=%d actual=%d %s",
			h.PayoutID, h.UserID, h.Status, h.Expected, h.Actual, h.Currency))
	}
	for i, d := range s.Disputes {
		if i == alertListed {
			break
		}
		out = append(out, fmt.Sprintf("disputes: dispute %s (user %s, %s) expected=%d actual=%d %s",
			d.Dispute, d.UserID, d.State, d.Expected, d.Actual, d.Currency))
	}
	for i, r := range s.Receivables {
		if i == alertListed {
			break
		}
		out = append(out, fmt.Sprintf("receivables: user %s owed=%d receivables say=%d %s", r.UserID, r.Owed, r.LedgerOwed, r.Currency))
	}
	for _, a := range s.AccountProblems {
		out = append(out, fmt.Sprintf("%s/%s expected=%d actual=%d", a.Owner, a.Currency, a.Expected, a.Actual))
	}
	return out
}

// unheld are the states in which a payout holds nothing in the payout holds
// account (UnfinishedHolds): before the hold is posted (Cancelable: nobody
// took it up) or once it failed (released, or settled and then returned).
func unheld(s payoutstate.Status) bool { return s.Cancelable() || s == payoutstate.Failed }
