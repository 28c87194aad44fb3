package pspsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/database"
)

// Run statuses and triggers (psp_reconciliation_runs).
const (
	StatusRequested = "requested"
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"

	TriggerScheduled = "scheduled"
	TriggerManual    = "manual"
)

// The SQL of psp_reconciliation_runs and psp_reconciliation_cursors, in one
// place. Times are the database's (now()): leases and the schedule are
// compared across replicas.
const (
	// sqlRequestScheduled requests a scheduled run unless one was requested
	// within the interval or one is active (the partial unique index).
	sqlRequestScheduled = `
INSERT INTO psp_reconciliation_runs (trigger)
SELECT 'scheduled'
WHERE NOT EXISTS (
    SELECT 1 FROM psp_reconciliation_runs
    WHERE requested_at > now() - make_interval(secs => $1) OR status IN ('requested', 'running'))
ON CONFLICT DO NOTHING
RETURNING id`

	// sqlClaim takes the oldest requested run, or a running one whose
	// lease lapsed (its worker died).
	sqlClaim = `
UPDATE psp_reconciliation_runs SET status = 'running', started_at = coalesce(started_at, now()),
    locked_by = $1, lease_until = now() + make_interval(secs => $2), attempts = attempts + 1
WHERE id = (
    SELECT id FROM psp_reconciliation_runs
    WHERE status = 'requested' OR (status = 'running' AND lease_until < now())
    ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id, trigger, now()`

	sqlRenew = `
UPDATE psp_reconciliation_runs SET lease_until = now() + make_interval(secs => $3)
WHERE id = $1 AND locked_by = $2 AND status = 'running'`

	// sqlRelease hands an unfinished run back (the worker is stopping).
	sqlRelease = `
UPDATE psp_reconciliation_runs SET status = 'requested', locked_by = NULL, lease_until = NULL
WHERE id = $1 AND locked_by = $2 AND status = 'running'`

	sqlFinish = `
UPDATE psp_reconciliation_runs SET status = $3, finished_at = now(), locked_by = NULL, lease_until = NULL,
    events_found = $4, events_recovered = $5, events_present = $6, disagreement_count = $7,
    report = $8, disagreements = $9, error = nullif($10, '')
WHERE id = $1 AND locked_by = $2 AND status = 'running'`

	sqlFinishCounts = `
UPDATE psp_reconciliation_runs SET disagreements_new = $2, disagreements_open = $3, disagreements_cleared = $4,
    disagreements = $5
WHERE id = $1`

	// sqlSeeDisagreement opens a disagreement or, when it is open already,
	// records that this run saw it again; fresh says which.
	sqlSeeDisagreement = `
INSERT INTO psp_disagreements (provider, kind, subject, payout_id, psp_object_id, psp_status, ledger_status, event_id, detail,
    first_seen_run, last_seen_run)
VALUES ($1, $2, $3, nullif($4, ''), nullif($5, ''), nullif($6, ''), nullif($7, ''), nullif($8, ''), $9, $10, $10)
ON CONFLICT (provider, kind, subject) WHERE cleared_at IS NULL DO UPDATE
SET last_seen_run = EXCLUDED.last_seen_run, last_seen_at = now(), psp_status = EXCLUDED.psp_status,
    ledger_status = EXCLUDED.ledger_status, detail = EXCLUDED.detail
RETURNING first_seen_at, first_seen_run = $10`

	// sqlClearDisagreements closes the open disagreements of the providers
	// this run compared in full that it did not see again.
	sqlClearDisagreements = `
UPDATE psp_disagreements SET cleared_run = $1, cleared_at = now()
WHERE cleared_at IS NULL AND provider = ANY($2::text[]) AND last_seen_run <> $1`

	sqlOpenDisagreements = `SELECT provider, kind, count(*) FROM psp_disagreements WHERE cleared_at IS NULL GROUP BY provider, kind`

	sqlCursor = `SELECT synced_until FROM psp_reconciliation_cursors WHERE provider = $1`

	sqlSetCursor = `
INSERT INTO psp_reconciliation_cursors (provider, synced_until, last_event_id, run_id)
VALUES ($1, $2, nullif($3, ''), $4)
ON CONFLICT (provider) DO UPDATE
SET synced_until = greatest(psp_reconciliation_cursors.synced_until, EXCLUDED.synced_until),
    last_event_id = coalesce(EXCLUDED.last_event_id, psp_reconciliation_cursors.last_event_id),
    run_id = EXCLUDED.run_id, updated_at = now()`

	sqlKnownEvents = `SELECT event_id FROM webhook_events WHERE provider = $1 AND event_id = ANY($2::text[])`

	sqlPayouts = `SELECT id::text, status, updated_at < now() - make_interval(secs => $2)
FROM payouts WHERE id = ANY($1::uuid[])`

	// sqlSucceededPayouts are this provider's payouts SUCCEEDED here since
	// since: each must be paid at the PSP.
	sqlSucceededPayouts = `
SELECT id::text, coalesce(psp_reference, '') FROM payouts
WHERE provider = $1 AND status = 'SUCCEEDED' AND updated_at >= $2
ORDER BY updated_at LIMIT $3`

	// sqlStoredReturns are refund and dispute events stored between since
	// and the grace ago: each must have its ledger posting by now.
	sqlStoredReturns = `
SELECT event_id, payload FROM webhook_events
WHERE provider = $1 AND received_at >= $2 AND received_at < now() - make_interval(secs => $3)
  AND (event_type LIKE 'refund.%' OR event_type LIKE 'charge.dispute.%' OR event_type = 'charge.refunded')
ORDER BY id LIMIT $4`

	sqlReturnPosted = `SELECT EXISTS (SELECT 1 FROM payment_returns WHERE provider = $1 AND kind = $2 AND object_id = $3)`
)

// Runs is psp_reconciliation_runs and the cursors.
type Runs struct {
	pool *pgxpool.Pool
}

// NewRuns returns the run store on pool.
func NewRuns(pool *pgxpool.Pool) *Runs { return &Runs{pool: pool} }

// RequestScheduled requests a scheduled run unless one was requested less
// than interval ago or one is active; it reports whether it did.
func (r *Runs) RequestScheduled(ctx context.Context, interval time.Duration) (bool, error) {
	var id int64
	err := r.pool.QueryRow(ctx, sqlRequestScheduled, interval.Seconds()).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("request scheduled psp reconciliation: %w", err)
	}
	return true, nil
}

// Claimed is a run this worker holds.
type Claimed struct {
	ID      int64
	Trigger string
	// Now is the database's time at the claim: the run's "now".
	Now time.Time
}

// Claim takes the next run for owner with a lease; ok is false when there
// is none.
func (r *Runs) Claim(ctx context.Context, owner string, lease time.Duration) (Claimed, bool, error) {
	var c Claimed
	err := r.pool.QueryRow(ctx, sqlClaim, owner, lease.Seconds()).Scan(&c.ID, &c.Trigger, &c.Now)
	if errors.Is(err, pgx.ErrNoRows) {
		return Claimed{}, false, nil
	}
	if err != nil {
		return Claimed{}, false, fmt.Errorf("claim psp reconciliation run: %w", err)
	}
	return c, true, nil
}

// Renew extends the lease; false means the run is no longer ours.
func (r *Runs) Renew(ctx context.Context, id int64, owner string, lease time.Duration) (bool, error) {
	ct, err := r.pool.Exec(ctx, sqlRenew, id, owner, lease.Seconds())
	if err != nil {
		return false, fmt.Errorf("renew psp reconciliation lease: %w", err)
	}
	return ct.RowsAffected() == 1, nil
}

// Release hands an unfinished run back to be claimed again.
func (r *Runs) Release(ctx context.Context, id int64, owner string) error {
	if _, err := r.pool.Exec(ctx, sqlRelease, id, owner); err != nil {
		return fmt.Errorf("release psp reconciliation run: %w", err)
	}
	return nil
}

// Finish stores the run's report and, in the same transaction, its
// disagreements' lifecycle (psp_disagreements): each one found is new or
// still open (seen by an earlier run), and the open ones of each provider
// compared in full that this run did not find are cleared. The counts and
// each disagreement's state land on the run for dlq-admin, which pages for
// new ones only.
func (r *Runs) Finish(ctx context.Context, id int64, owner string, rep Report, runErr error) error {
	status, msg := StatusSucceeded, ""
	if runErr != nil {
		status, msg = StatusFailed, runErr.Error()
	}
	providers, err := json.Marshal(rep.Providers)
	if err != nil {
		return fmt.Errorf("encode psp reconciliation report: %w", err)
	}
	dis := rep.Disagreements
	if dis == nil {
		dis = []Disagreement{}
	}
	return database.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		ct, err := tx.Exec(ctx, sqlFinish, id, owner, status, rep.Found, rep.Recovered, rep.Present,
			len(dis), providers, []byte("[]"), msg)
		if err != nil {
			return fmt.Errorf("finish psp reconciliation run: %w", err)
		}
		if ct.RowsAffected() != 1 {
			return fmt.Errorf("finish psp reconciliation run %d: no longer held by %s", id, owner)
		}
		fresh := 0
		for i := range dis {
			d := &dis[i]
			var first time.Time
			var isNew bool
			if err := tx.QueryRow(ctx, sqlSeeDisagreement, d.Provider, d.Kind, d.subject(), d.PayoutID, d.PSPObjectID,
				d.PSPStatus, d.LedgerStatus, d.EventID, d.Detail, id).Scan(&first, &isNew); err != nil {
				return fmt.Errorf("store psp disagreement: %w", err)
			}
			d.FirstSeenAt, d.State = &first, StateStillOpen
			if isNew {
				d.State = StateNew
				fresh++
			}
		}
		var compared []string
		for p, pr := range rep.Providers {
			if pr.Compared {
				compared = append(compared, p)
			}
		}
		ct, err = tx.Exec(ctx, sqlClearDisagreements, id, compared)
		if err != nil {
			return fmt.Errorf("clear psp disagreements: %w", err)
		}
		encoded, err := json.Marshal(dis)
		if err != nil {
			return fmt.Errorf("encode psp reconciliation disagreements: %w", err)
		}
		if _, err := tx.Exec(ctx, sqlFinishCounts, id, fresh, len(dis)-fresh, ct.RowsAffected(), encoded); err != nil {
			return fmt.Errorf("finish psp reconciliation run: %w", err)
		}
		return nil
	})
}

// OpenDisagreements counts the open disagreements by provider and kind.
func (r *Runs) OpenDisagreements(ctx context.Context) (map[[2]string]int, error) {
	rows, err := r.pool.Query(ctx, sqlOpenDisagreements)
	if err != nil {
		return nil, fmt.Errorf("read open psp disagreements: %w", err)
	}
	out := map[[2]string]int{}
	var (
		provider, kind string
		n              int
	)
	if _, err := pgx.ForEachRow(rows, []any{&provider, &kind, &n}, func() error {
		out[[2]string{provider, kind}] = n
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read open psp disagreements: %w", err)
	}
	return out, nil
}

// Cursor is how far the provider's record was read; ok is false before
// the first run.
func (r *Runs) Cursor(ctx context.Context, provider string) (time.Time, bool, error) {
	var t time.Time
	err := r.pool.QueryRow(ctx, sqlCursor, provider).Scan(&t)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read psp reconciliation cursor: %w", err)
	}
	return t, true, nil
}

// SetCursor moves the provider's cursor forward (never back).
func (r *Runs) SetCursor(ctx context.Context, provider string, until time.Time, lastEventID string, runID int64) error {
	if _, err := r.pool.Exec(ctx, sqlSetCursor, provider, until, lastEventID, runID); err != nil {
		return fmt.Errorf("store psp reconciliation cursor: %w", err)
	}
	return nil
}

// Known returns which of ids are stored already.
func (r *Runs) Known(ctx context.Context, provider string, ids []string) (map[string]bool, error) {
	rows, err := r.pool.Query(ctx, sqlKnownEvents, provider, ids)
	if err != nil {
		return nil, fmt.Errorf("read stored events: %w", err)
	}
	known, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read stored events: %w", err)
	}
	out := make(map[string]bool, len(known))
	for _, id := range known {
		out[id] = true
	}
	return out, nil
}

// payoutRow is one of our payouts as the comparison needs it.
type payoutRow struct {
	Status string
	// Settled: unchanged for longer than the grace.
	Settled bool
}

func (r *Runs) payouts(ctx context.Context, ids []string, grace time.Duration) (map[string]payoutRow, error) {
	rows, err := r.pool.Query(ctx, sqlPayouts, ids, grace.Seconds())
	if err != nil {
		return nil, fmt.Errorf("read payouts: %w", err)
	}
	out := map[string]payoutRow{}
	var (
		id, status string
		settled    bool
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &status, &settled}, func() error {
		out[id] = payoutRow{Status: status, Settled: settled}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read payouts: %w", err)
	}
	return out, nil
}

type succeededPayout struct{ ID, PSPReference string }

func (r *Runs) succeeded(ctx context.Context, provider string, since time.Time, limit int) ([]succeededPayout, error) {
	rows, err := r.pool.Query(ctx, sqlSucceededPayouts, provider, since, limit)
	if err != nil {
		return nil, fmt.Errorf("read succeeded payouts: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[succeededPayout])
	if err != nil {
		return nil, fmt.Errorf("read succeeded payouts: %w", err)
	}
	return out, nil
}

type storedEvent struct {
	EventID string
	Payload []byte
}

func (r *Runs) storedReturns(ctx context.Context, provider string, since time.Time, grace time.Duration, limit int) ([]storedEvent, error) {
	rows, err := r.pool.Query(ctx, sqlStoredReturns, provider, since, grace.Seconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("read stored refunds and disputes: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[storedEvent])
	if err != nil {
		return nil, fmt.Errorf("read stored refunds and disputes: %w", err)
	}
	return out, nil
}

func (r *Runs) returnPosted(ctx context.Context, provider, kind, objectID string) (bool, error) {
	var ok bool
	if err := r.pool.QueryRow(ctx, sqlReturnPosted, provider, kind, objectID).Scan(&ok); err != nil {
		return false, fmt.Errorf("read payment returns: %w", err)
	}
	return ok, nil
}
