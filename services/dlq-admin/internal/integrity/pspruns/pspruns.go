package pspruns

import (
	"cmp"
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
	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/pspruns/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/watch"
)

// what is the part of dlq-admin this package's errors are marked with.
const what = "the PSP reconciliation store"

// Alert keys (pkg/alert's: what pages is AegisPSPDisagreementOpen on
// aegis_psp_disagreements_open and AegisPSPReconciliationFailed on
// aegis_psp_reconciliation_last_run_failed, both exported by webhook-api).
const (
	AlertKey        = alert.PSPReconciliationKey
	AlertKeyFailed  = alert.PSPReconciliationFailedKey
	AlertKeyCleared = alert.PSPReconciliationClearedKey
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

// toDisagreement is the OpenDisagreement of a psp_disagreements row
// (OpenDisagreements and ClearedDisagreements select the same columns).
func toDisagreement(r sqlcdb.OpenDisagreementsRow) OpenDisagreement {
	return OpenDisagreement{Provider: r.Provider, Kind: r.Kind, PayoutID: r.PayoutID, PSPObjectID: r.PSPObjectID,
		PSPStatus: r.PspStatus, LedgerStatus: r.LedgerStatus, Detail: r.Detail, FirstSeenRun: r.FirstSeenRun,
		FirstSeenAt: r.FirstSeenAt, LastSeenRun: r.LastSeenRun, LastSeenAt: r.LastSeenAt}
}

// Open lists the disagreements open now, oldest first.
func (s *Store) Open(ctx context.Context) ([]OpenDisagreement, error) {
	rows, err := s.q.OpenDisagreements(ctx, maxOpenListed)
	if err != nil {
		return nil, fmt.Errorf("read psp disagreements: %w", err)
	}
	out := make([]OpenDisagreement, 0, len(rows))
	for _, r := range rows {
		out = append(out, toDisagreement(r))
	}
	return out, nil
}

// clearedBy lists what run id found gone, at most limit.
func clearedBy(ctx context.Context, q *sqlcdb.Queries, id int64, limit int) ([]OpenDisagreement, error) {
	rows, err := q.ClearedDisagreements(ctx, sqlcdb.ClearedDisagreementsParams{RunID: id, MaxRows: limit})
	if err != nil {
		return nil, fmt.Errorf("read cleared psp disagreements: %w", err)
	}
	out := make([]OpenDisagreement, 0, len(rows))
	for _, r := range rows {
		out = append(out, toDisagreement(sqlcdb.OpenDisagreementsRow(r)))
	}
	return out, nil
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

// runRow is the row every statement returning a run returns (queries.sql);
// the others' row types convert to it.
type runRow = sqlcdb.GetRow

// toRun is the Run of row r, or r's error. The run was alerted on when
// dlq-admin claimed its alert, or, before that table existed (and by the
// previous release during a rollout), when the run's alerted_at was set.
func toRun(r runRow, err error) (Run, error) {
	if err != nil {
		return Run{}, err
	}
	return Run{ID: r.ID, Status: r.Status, Trigger: r.Trigger, RequestedBy: r.RequestedBy, RequestedAt: r.RequestedAt,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt, Attempts: r.Attempts, EventsFound: r.EventsFound,
		EventsRecovered: r.EventsRecovered, EventsPresent: r.EventsPresent, DisagreementCount: r.DisagreementCount,
		Providers: r.Report, Disagreements: r.Disagreements, Error: r.Error, AlertedAt: cmp.Or(r.ClaimedAt, r.AlertedAt),
		DisagreementsNew: r.DisagreementsNew, DisagreementsOpen: r.DisagreementsOpen,
		DisagreementsCleared: r.DisagreementsCleared}, nil
}

// Store reads and requests runs.
type Store struct {
	pool *pgxpool.Pool
	q    *sqlcdb.Queries
	jobs jobs.Enqueuer
}

// New returns the run store on pool; requested runs' River jobs are queued
// on enq (an insert-only client: webhook-api works them).
func New(pool *pgxpool.Pool, enq jobs.Enqueuer) *Store {
	return &Store{pool: pool, q: sqlcdb.New(pool), jobs: enq}
}

// Request asks for a run now, on behalf of actor (audited): the run record
// (through webhook-api's request_psp_reconciliation_run: the table is its),
// its River job (jobs.PSPReconcileArgs, worked by webhook-api) and its
// audit_log row in one transaction. ErrBusy while one is requested or
// running. An active run whose River job will never work it (discarded
// after its last attempt) is ended as failed first, so that it cannot
// refuse every request when no schedule runs (PSP_RECONCILE_INTERVAL=0;
// the schedule ends such a run too).
func (s *Store) Request(ctx context.Context, actor string) (_ Run, err error) {
	defer fault.Mark(&err, what)
	var run Run
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, _, err := jobs.EndOrphanedPSPRun(ctx, tx, "its River job ended without finishing the run (attempts spent); ended by the next request"); err != nil {
			return err
		}
		q := s.q.WithTx(tx)
		id, err := q.Request(ctx, actor)
		if database.IsUniqueViolation(err, "psp_reconciliation_runs_one_active") {
			return ErrBusy
		}
		if err != nil {
			return fmt.Errorf("request psp reconciliation: %w", err)
		}
		if run, err = toRun(q.Get(ctx, id)); err != nil {
			return fmt.Errorf("read requested psp reconciliation run %d: %w", id, err)
		}
		if _, err := s.jobs.InsertTx(ctx, tx, jobs.PSPReconcileArgs{RunID: run.ID}, nil); err != nil {
			return fmt.Errorf("queue River job for psp reconciliation run %d: %w", run.ID, err)
		}
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: ActionRequest, TargetType: TargetRun,
			TargetID: audit.ID(run.ID), At: run.RequestedAt})
	})
	if err != nil {
		return Run{}, err
	}
	return run, nil
}

// Get returns run id.
func (s *Store) Get(ctx context.Context, id int64) (_ Run, err error) {
	defer fault.Mark(&err, what)
	return one(toRun(s.q.Get(ctx, id)))
}

// Latest returns the latest run, with every disagreement open now.
func (s *Store) Latest(ctx context.Context) (_ Run, err error) {
	defer fault.Mark(&err, what)
	row, err := s.q.Latest(ctx)
	run, err := one(toRun(runRow(row), err))
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
	return watch.Run(ctx, watch.Task{Every: w.interval,
		Do:     func(ctx context.Context) error { _, err := w.Check(ctx); return err },
		Failed: func(err error) { w.logger.WarnContext(ctx, "psp reconciliation alerts", "error", err) }})
}

// Check alerts on every run waiting for it and reports how many. Each run
// is claimed (its psp_run_alerts row), alerted on and committed in one
// transaction: replicas checking at once alert on a run once, and a
// rollback leaves it to the next check.
func (w *Watcher) Check(ctx context.Context) (int, error) {
	n := 0
	var lost int64
	for {
		done, claimed := false, false
		err := database.InTx(ctx, w.pool, func(tx pgx.Tx) error {
			q := sqlcdb.New(tx)
			c, err := q.ClaimAlert(ctx)
			if errors.Is(err, pgx.ErrNoRows) {
				done = true
				return nil
			}
			if err != nil {
				return fmt.Errorf("claim a run to alert on: %w", err)
			}
			if !c.Claimed {
				// Another replica's claim committed first: the next look
				// skips the run. Lost twice, something else holds it.
				if c.ID == lost {
					return fmt.Errorf("claim psp reconciliation run %d to alert on: lost twice", c.ID)
				}
				lost = c.ID
				return nil
			}
			claimed = true
			run, err := toRun(q.Get(ctx, c.ID))
			if err != nil {
				return fmt.Errorf("read run %d to alert on: %w", c.ID, err)
			}
			var cleared []OpenDisagreement
			if run.DisagreementsCleared > 0 {
				if cleared, err = clearedBy(ctx, q, run.ID, alertListed); err != nil {
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
		if claimed {
			n++
		}
	}
}

// alertListed is how many disagreements an alert names.
const alertListed = 10

type disagreement struct {
	Provider    string `json:"provider"`
	Kind        string `json:"kind"`
	PayoutID    string `json:"payout_id"`
	PSPObjectID string `json:"psp_object_id"`
	// PSPObjectIDs: every object when there are several (a double
	// payment); absent from runs stored before it existed.
	PSPObjectIDs []string `json:"psp_object_ids"`
	PSPStatus    string   `json:"psp_status"`
	LedgerStatus string   `json:"ledger_status"`
	Detail       string   `json:"detail"`
	State        string   `json:"state"`
}

// objects names the disagreement's PSP objects: all of them when there
// are several.
func (d disagreement) objects() string {
	if len(d.PSPObjectIDs) > 0 {
		return strings.Join(d.PSPObjectIDs, ",")
	}
	return d.PSPObjectID
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
			named = append(named, fmt.Sprintf("%s %s payout=%s psp=%s (%s): %s", d.Provider, d.Kind, d.PayoutID, d.objects(), d.PSPStatus, d.Detail))
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
