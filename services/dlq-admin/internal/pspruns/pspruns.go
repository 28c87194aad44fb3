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
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/store"
)

// Alert keys.
const (
	AlertKey        = "psp_reconciliation"
	AlertKeyFailed  = "psp_reconciliation_failed"
	AlertKeyCleared = "psp_reconciliation_cleared"
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

const runColumns = `id, status, trigger, requested_by, requested_at, started_at, finished_at, attempts,
events_found, events_recovered, events_present, disagreement_count, report, disagreements, error, alerted_at,
disagreements_new, disagreements_open, disagreements_cleared`

const (
	sqlRequest = `INSERT INTO psp_reconciliation_runs (trigger, requested_by) VALUES ('manual', $1)
RETURNING ` + runColumns
	sqlGet    = `SELECT ` + runColumns + ` FROM psp_reconciliation_runs WHERE id = $1`
	sqlLatest = `SELECT ` + runColumns + ` FROM psp_reconciliation_runs ORDER BY id DESC LIMIT 1`
	// sqlUnalerted is the oldest finished run with something to alert on,
	// locked: replicas do not alert on it twice.
	sqlUnalerted = `SELECT ` + runColumns + ` FROM psp_reconciliation_runs
WHERE (disagreements_new > 0 OR disagreements_cleared > 0 OR status = 'failed') AND alerted_at IS NULL AND finished_at IS NOT NULL
ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`
	sqlMarkAlerted = `UPDATE psp_reconciliation_runs SET alerted_at = now() WHERE id = $1`

	// sqlOpen is every disagreement open now, oldest first.
	sqlOpen = `SELECT provider, kind, coalesce(payout_id, ''), coalesce(psp_object_id, ''), coalesce(psp_status, ''),
coalesce(ledger_status, ''), detail, first_seen_run, first_seen_at, last_seen_run, last_seen_at
FROM psp_disagreements WHERE cleared_at IS NULL ORDER BY first_seen_at, id LIMIT $1`
	// sqlCleared is what run $1 found gone.
	sqlCleared = `SELECT provider, kind, coalesce(payout_id, ''), coalesce(psp_object_id, ''), coalesce(psp_status, ''),
coalesce(ledger_status, ''), detail, first_seen_run, first_seen_at, last_seen_run, last_seen_at
FROM psp_disagreements WHERE cleared_run = $1 ORDER BY id LIMIT $2`
)

// maxOpenListed bounds the open disagreements GET /v1/psp-reconciliation lists.
const maxOpenListed = 500

// OpenDisagreement is a disagreement found by a run and not cleared since
// (psp_disagreements).
type OpenDisagreement struct {
	Provider     string    `json:"provider"`
	Kind         string    `json:"kind"`
	PayoutID     string    `json:"payout_id,omitempty"`
	PSPObjectID  string    `json:"psp_object_id,omitempty"`
	PSPStatus    string    `json:"psp_status,omitempty"`
	LedgerStatus string    `json:"ledger_status,omitempty"`
	Detail       string    `json:"detail"`
	FirstSeenRun int64     `json:"first_seen_run"`
	FirstSeenAt  time.Time `json:"first_seen_at"`
	LastSeenRun  int64     `json:"last_seen_run"`
	LastSeenAt   time.Time `json:"last_seen_at"`
}

func (s *Store) disagreements(ctx context.Context, q string, args ...any) ([]OpenDisagreement, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read psp disagreements: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[OpenDisagreement])
	if err != nil {
		return nil, fmt.Errorf("read psp disagreements: %w", err)
	}
	if out == nil {
		out = []OpenDisagreement{}
	}
	return out, nil
}

// Open lists the disagreements open now, oldest first.
func (s *Store) Open(ctx context.Context) ([]OpenDisagreement, error) {
	return s.disagreements(ctx, sqlOpen, maxOpenListed)
}

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
	// Of the run's disagreements, those first found by it (paged) and
	// those still open from an earlier run; and how many earlier ones it
	// found gone.
	DisagreementsNew     int `json:"disagreements_new"`
	DisagreementsOpen    int `json:"disagreements_still_open"`
	DisagreementsCleared int `json:"disagreements_cleared"`
	// OpenDisagreements: every disagreement open now (GET
	// /v1/psp-reconciliation only).
	// (A pointer: absent elsewhere, [] when none is open.)
	OpenDisagreements *[]OpenDisagreement `json:"open_disagreements,omitempty"`
}

func scanRun(row pgx.Row) (Run, error) {
	var r Run
	var providers, dis []byte
	err := row.Scan(&r.ID, &r.Status, &r.Trigger, &r.RequestedBy, &r.RequestedAt, &r.StartedAt, &r.FinishedAt, &r.Attempts,
		&r.EventsFound, &r.EventsRecovered, &r.EventsPresent, &r.DisagreementCount, &providers, &dis, &r.Error, &r.AlertedAt,
		&r.DisagreementsNew, &r.DisagreementsOpen, &r.DisagreementsCleared)
	r.Providers, r.Disagreements = providers, dis
	return r, err
}

// Store reads and requests runs.
type Store struct {
	pool *pgxpool.Pool
}

// New returns the run store on pool.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Request asks for a run now, on behalf of actor (audited); ErrBusy while
// one is requested or running.
func (s *Store) Request(ctx context.Context, actor string) (Run, error) {
	var run Run
	err := database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if run, err = scanRun(tx.QueryRow(ctx, sqlRequest, actor)); err != nil {
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
	return s.one(ctx, sqlGet, id)
}

// Latest returns the latest run, with every disagreement open now.
func (s *Store) Latest(ctx context.Context) (Run, error) {
	run, err := s.one(ctx, sqlLatest)
	if err != nil {
		return Run{}, err
	}
	open, err := s.Open(ctx)
	if err != nil {
		return Run{}, err
	}
	run.OpenDisagreements = &open
	return run, nil
}

func (s *Store) one(ctx context.Context, q string, args ...any) (Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, q, args...))
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
	store    *Store
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
	return &Watcher{pool: pool, store: New(pool), raiser: raiser, interval: interval, logger: deps.Logger}
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
			run, err := scanRun(tx.QueryRow(ctx, sqlUnalerted))
			if errors.Is(err, pgx.ErrNoRows) {
				done = true
				return nil
			}
			if err != nil {
				return fmt.Errorf("read runs to alert on: %w", err)
			}
			if _, err := tx.Exec(ctx, sqlMarkAlerted, run.ID); err != nil {
				return fmt.Errorf("mark run alerted: %w", err)
			}
			var cleared []OpenDisagreement
			if run.DisagreementsCleared > 0 {
				if cleared, err = w.store.disagreements(ctx, sqlCleared, run.ID, alertListed); err != nil {
					return err
				}
			}
			// Raise only queues (the alerter delivers and retries on its
			// own), so a rollback after it cannot lose the alert, at worst
			// repeat it; the key folds a repeat.
			for _, a := range runAlerts(run, cleared) {
				w.raiser.Raise(ctx, a)
			}
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
	State        string `json:"state"`
}

// runAlerts are a run's alerts: a page (critical) naming the
// disagreements it found first, and only those (one still open from an
// earlier run was paged for then, and stays listed by the API and the
// aegis_psp_disagreements_open gauge); an error for a failed run that found
// nothing new; a notice (info) for the disagreements it found gone.
func runAlerts(run Run, cleared []OpenDisagreement) []alert.Alert {
	var out []alert.Alert
	switch {
	case run.DisagreementsNew > 0:
		var dis []disagreement
		_ = json.Unmarshal(run.Disagreements, &dis) // stored by the job as this shape
		var named []string
		for _, d := range dis {
			if d.State != "" && d.State != "new" {
				continue
			}
			if len(named) == alertListed {
				break
			}
			named = append(named, fmt.Sprintf("%s %s payout=%s psp=%s (%s): %s", d.Provider, d.Kind, d.PayoutID, d.PSPObjectID, d.PSPStatus, d.Detail))
		}
		out = append(out, alert.Alert{
			Key:      AlertKey,
			Severity: alert.Critical,
			Summary: fmt.Sprintf("PSP reconciliation run %d: %d new disagreement(s) between the PSPs and the ledger (%d still open from earlier runs): %s",
				run.ID, run.DisagreementsNew, run.DisagreementsOpen, strings.Join(named, "; ")),
			Details: map[string]any{"run_id": run.ID, "disagreements": run.DisagreementCount, "new": run.DisagreementsNew,
				"still_open": run.DisagreementsOpen, "listed": named, "events_recovered": run.EventsRecovered},
		})
	case run.Status == "failed":
		msg := ""
		if run.Error != nil {
			msg = *run.Error
		}
		out = append(out, alert.Alert{Key: AlertKeyFailed, Severity: alert.Error,
			Summary: fmt.Sprintf("PSP reconciliation run %d failed: %s", run.ID, msg),
			Details: map[string]any{"run_id": run.ID, "error": msg, "events_recovered": run.EventsRecovered}})
	}
	if run.DisagreementsCleared > 0 {
		var named []string
		for _, d := range cleared {
			named = append(named, fmt.Sprintf("%s %s payout=%s psp=%s (open since run %d)", d.Provider, d.Kind, d.PayoutID, d.PSPObjectID, d.FirstSeenRun))
		}
		out = append(out, alert.Alert{Key: AlertKeyCleared, Severity: alert.Info,
			Summary: fmt.Sprintf("PSP reconciliation run %d: %d disagreement(s) cleared (%d still open): %s",
				run.ID, run.DisagreementsCleared, run.DisagreementsOpen, strings.Join(named, "; ")),
			Details: map[string]any{"run_id": run.ID, "cleared": run.DisagreementsCleared, "listed": named}})
	}
	return out
}
