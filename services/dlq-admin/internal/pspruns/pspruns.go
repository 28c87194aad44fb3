package pspruns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/pspruns/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/store"
)

// Alert keys.
const (
	AlertKey       = "psp_reconciliation"
	AlertKeyFailed = "psp_reconciliation_failed"
)

// Audit action and target of a requested run.
const (
	ActionRequest = "psp_reconcile"
	TargetRun     = "psp_reconciliation_run"
)

var (
	// ErrBusy: a run is requested or running already.
	ErrBusy = errors.New("a PSP reconciliation is already requested or running")
	// ErrNotFound: no such run (or none yet, for the latest).
	ErrNotFound = errors.New("no such PSP reconciliation run")
)

// Run is one stored run.
type Run struct {
	ID                int64           `json:"run_id"`
	Status            string          `json:"status"`
	Trigger           string          `json:"trigger"`
	RequestedBy       *string         `json:"requested_by"`
	RequestedAt       time.Time       `json:"requested_at"`
	StartedAt         *time.Time      `json:"started_at"`
	FinishedAt        *time.Time      `json:"finished_at"`
	Attempts          int             `json:"attempts"`
	EventsFound       int             `json:"events_found"`
	EventsRecovered   int             `json:"events_recovered"`
	EventsPresent     int             `json:"events_present"`
	DisagreementCount int             `json:"disagreement_count"`
	Providers         json.RawMessage `json:"providers"`
	Disagreements     json.RawMessage `json:"disagreements"`
	Error             *string         `json:"error"`
	AlertedAt         *time.Time      `json:"alerted_at"`
}

// runRow is the row every statement returning a run returns (queries.sql);
// the others' row types convert to it.
type runRow = sqlcdb.GetRow

// toRun is the Run of row r, or r's error.
func toRun(r runRow, err error) (Run, error) {
	if err != nil {
		return Run{}, err
	}
	return Run{ID: r.ID, Status: r.Status, Trigger: r.Trigger, RequestedBy: r.RequestedBy, RequestedAt: r.RequestedAt,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Attempts: r.Attempts, EventsFound: r.EventsFound,
		EventsRecovered: r.EventsRecovered, EventsPresent: r.EventsPresent, DisagreementCount: r.DisagreementCount,
		Providers: r.Report, Disagreements: r.Disagreements, Error: r.Error, AlertedAt: r.AlertedAt}, nil
}

// Store reads and requests runs.
type Store struct {
	pool *pgxpool.Pool
	q    *sqlcdb.Queries
}

// New returns the run store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool, q: sqlcdb.New(pool)} }

// Request asks for a run now, on behalf of actor (audited); ErrBusy while
// one is requested or running.
func (s *Store) Request(ctx context.Context, actor string) (Run, error) {
	var run Run
	err := database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		row, err := s.q.WithTx(tx).Request(ctx, actor)
		if run, err = toRun(runRow(row), err); err != nil {
			if database.IsUniqueViolation(err, "psp_reconciliation_runs_one_active") {
				return ErrBusy
			}
			return fmt.Errorf("request psp reconciliation: %w", err)
		}
		return store.Audit(ctx, tx, store.AuditEntry{Actor: actor, Action: ActionRequest, TargetType: TargetRun,
			TargetID: store.ID(run.ID), At: run.RequestedAt})
	})
	if err != nil {
		return Run{}, err
	}
	return run, nil
}

// Get returns run id.
func (s *Store) Get(ctx context.Context, id int64) (Run, error) {
	return one(toRun(s.q.Get(ctx, id)))
}

// Latest returns the latest run.
func (s *Store) Latest(ctx context.Context) (Run, error) {
	row, err := s.q.Latest(ctx)
	return one(toRun(runRow(row), err))
}

func one(r Run, err error) (Run, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return Run{}, ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("read psp reconciliation run: %w", err)
	}
	return r, nil
}

// Raiser is what alerts go through: *alert.Alerter.
type Raiser interface {
	Raise(ctx context.Context, a alert.Alert)
}

// Watcher alerts on stored runs.
type Watcher struct {
	pool     *pgxpool.Pool
	raiser   Raiser
	interval time.Duration
	logger   *slog.Logger
}

// NewWatcher checks for runs to alert on every interval.
func NewWatcher(pool *pgxpool.Pool, raiser Raiser, interval time.Duration, deps lifecycle.Deps) *Watcher {
	deps = deps.WithDefaults()
	if interval <= 0 {
		interval = 15 * time.Second
	}
	return &Watcher{pool: pool, raiser: raiser, interval: interval, logger: deps.Logger}
}

// Run checks until ctx ends.
func (w *Watcher) Run(ctx context.Context) error {
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		if _, err := w.Check(ctx); err != nil && ctx.Err() == nil {
			w.logger.WarnContext(ctx, "psp reconciliation alerts", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Check alerts on every run waiting for it and reports how many.
func (w *Watcher) Check(ctx context.Context) (int, error) {
	n := 0
	for {
		done := false
		err := database.InTx(ctx, w.pool, func(tx pgx.Tx) error {
			q := sqlcdb.New(tx)
			row, err := q.Unalerted(ctx)
			run, err := toRun(runRow(row), err)
			if errors.Is(err, pgx.ErrNoRows) {
				done = true
				return nil
			}
			if err != nil {
				return fmt.Errorf("read runs to alert on: %w", err)
			}
			if err := q.MarkAlerted(ctx, run.ID); err != nil {
				return fmt.Errorf("mark run alerted: %w", err)
			}
			// Raise only queues (the alerter delivers and retries on its
			// own), so a rollback after it cannot lose the alert, at worst
			// repeat it; the key folds a repeat.
			w.raiser.Raise(ctx, runAlert(run))
			return nil
		})
		if err != nil || done {
			return n, err
		}
		n++
	}
}

// alertListed is how many disagreements an alert names.
const alertListed = 10

type disagreement struct {
	Provider     string `json:"provider"`
	Kind         string `json:"kind"`
	PayoutID     string `json:"payout_id"`
	PSPObjectID  string `json:"psp_object_id"`
	PSPStatus    string `json:"psp_status"`
	LedgerStatus string `json:"ledger_status"`
	Detail       string `json:"detail"`
}

func runAlert(run Run) alert.Alert {
	if run.DisagreementCount == 0 {
		msg := ""
		if run.Error != nil {
			msg = *run.Error
		}
		return alert.Alert{Key: AlertKeyFailed, Severity: alert.Error,
			Summary: fmt.Sprintf("PSP reconciliation run %d failed: %s", run.ID, msg),
			Details: map[string]any{"run_id": run.ID, "error": msg, "events_recovered": run.EventsRecovered}}
	}
	var dis []disagreement
	_ = json.Unmarshal(run.Disagreements, &dis) // stored by the job as this shape
	var named []string
	for i, d := range dis {
		if i == alertListed {
			break
		}
		named = append(named, fmt.Sprintf("%s %s payout=%s psp=%s (%s): %s", d.Provider, d.Kind, d.PayoutID, d.PSPObjectID, d.PSPStatus, d.Detail))
	}
	return alert.Alert{
		Key:      AlertKey,
		Severity: alert.Critical,
		Summary: fmt.Sprintf("PSP reconciliation run %d: %d disagreement(s) between the PSPs and the ledger: %s",
			run.ID, run.DisagreementCount, strings.Join(named, "; ")),
		Details: map[string]any{"run_id": run.ID, "disagreements": run.DisagreementCount, "listed": named,
			"events_recovered": run.EventsRecovered},
	}
}
