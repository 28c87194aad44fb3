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
	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/pspsync/sqlcdb"
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

// ErrNotHeld: the run is no longer held by this attempt (River rescued or
// retried its job and another attempt took it over, or it ended).
var ErrNotHeld = errors.New("psp reconciliation run no longer held by this attempt")

// Runs is psp_reconciliation_runs and the cursors.
// Its SQL is in queries.sql. Times are the database's (now()).
type Runs struct {
	pool *pgxpool.Pool
	q    *sqlcdb.Queries
}

// NewRuns returns the run store on pool.
func NewRuns(pool *pgxpool.Pool) *Runs { return &Runs{pool: pool, q: sqlcdb.New(pool)} }

// RequestScheduled records a scheduled run and queues its River job on enq,
// in one transaction; ok is false (and nothing is queued) when a run is
// requested or running already: that one is this period's run.
func (r *Runs) RequestScheduled(ctx context.Context, enq jobs.Enqueuer) (id int64, ok bool, err error) {
	err = database.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		id, err = r.q.WithTx(tx).InsertRun(ctx, sqlcdb.InsertRunParams{Trigger: TriggerScheduled})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("request scheduled psp reconciliation: %w", err)
		}
		if _, err := enq.InsertTx(ctx, tx, jobs.PSPReconcileArgs{RunID: id}, nil); err != nil {
			return fmt.Errorf("queue River job for psp reconciliation run %d: %w", id, err)
		}
		ok = true
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return id, ok, nil
}

// EndOrphaned ends, as failed with why, the active run whose River job
// will never work it, so that it does not block the runs after it
// (jobs.EndOrphanedPSPRun); ok is false when there was none.
func (r *Runs) EndOrphaned(ctx context.Context, why string) (id int64, ok bool, err error) {
	err = database.InTx(ctx, r.pool, func(tx pgx.Tx) error {
		id, ok, err = jobs.EndOrphanedPSPRun(ctx, tx, why)
		return err
	})
	return id, ok, err
}

// Claimed is a run this worker holds.
type Claimed struct {
	ID      int64
	Trigger string
	// Now is the database's time at the start: the run's "now".
	Now time.Time
}

// Start marks run id running under token (the River attempt working it),
// taking it over from an earlier attempt if there was one; ok is false when
// the run is over.
func (r *Runs) Start(ctx context.Context, id int64, token string) (Claimed, bool, error) {
	c, err := r.q.Start(ctx, sqlcdb.StartParams{ID: id, Token: token})
	if errors.Is(err, pgx.ErrNoRows) {
		return Claimed{}, false, nil
	}
	if err != nil {
		return Claimed{}, false, fmt.Errorf("start psp reconciliation run %d: %w", id, err)
	}
	return Claimed{ID: c.ID, Trigger: c.Trigger, Now: c.Now}, true, nil
}

// Release hands an unfinished run back to be claimed again.
func (r *Runs) Release(ctx context.Context, id int64, owner string) error {
	if err := r.q.Release(ctx, sqlcdb.ReleaseParams{ID: id, Owner: owner}); err != nil {
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
		q := r.q.WithTx(tx)
		n, err := q.Finish(ctx, sqlcdb.FinishParams{
			ID: id, Owner: owner, Status: status,
			EventsFound: rep.Found, EventsRecovered: rep.Recovered, EventsPresent: rep.Present,
			DisagreementCount: len(dis), Report: providers, Disagreements: []byte("[]"), Error: msg,
		})
		if err != nil {
			return fmt.Errorf("finish psp reconciliation run: %w", err)
		}
		if n != 1 {
			return fmt.Errorf("finish psp reconciliation run %d by %s: %w", id, owner, ErrNotHeld)
		}
		fresh := 0
		for i := range dis {
			d := &dis[i]
			seen, err := q.SeeDisagreement(ctx, sqlcdb.SeeDisagreementParams{
				Provider: d.Provider, Kind: d.Kind, Subject: d.subject(), PayoutID: d.PayoutID, PSPObjectID: d.PSPObjectID,
				PspStatus: d.PSPStatus, LedgerStatus: d.LedgerStatus, EventID: d.EventID, Detail: d.Detail, RunID: id,
			})
			if err != nil {
				return fmt.Errorf("store psp disagreement: %w", err)
			}
			d.FirstSeenAt, d.State = &seen.FirstSeenAt, StateStillOpen
			if seen.Fresh {
				d.State = StateNew
				fresh++
			}
		}
		compared := []string{}
		for p, pr := range rep.Providers {
			if pr.Compared {
				compared = append(compared, p)
			}
		}
		cleared, err := q.ClearDisagreements(ctx, sqlcdb.ClearDisagreementsParams{RunID: id, Providers: compared})
		if err != nil {
			return fmt.Errorf("clear psp disagreements: %w", err)
		}
		encoded, err := json.Marshal(dis)
		if err != nil {
			return fmt.Errorf("encode psp reconciliation disagreements: %w", err)
		}
		if err := q.FinishCounts(ctx, sqlcdb.FinishCountsParams{ID: id, NewCount: fresh, OpenCount: len(dis) - fresh,
			ClearedCount: int(cleared), Disagreements: encoded}); err != nil {
			return fmt.Errorf("finish psp reconciliation run: %w", err)
		}
		return nil
	})
}

// OpenDisagreements counts the open disagreements by provider and kind.
func (r *Runs) OpenDisagreements(ctx context.Context) (map[[2]string]int, error) {
	rows, err := r.q.OpenDisagreements(ctx)
	if err != nil {
		return nil, fmt.Errorf("read open psp disagreements: %w", err)
	}
	out := make(map[[2]string]int, len(rows))
	for _, row := range rows {
		out[[2]string{row.Provider, row.Kind}] = row.Open
	}
	return out, nil
}

// LastSucceeded is when the latest succeeded run finished; ok is false
// when none has.
func (r *Runs) LastSucceeded(ctx context.Context) (t time.Time, ok bool, err error) {
	t, err = r.q.LastSucceeded(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("read the latest succeeded psp reconciliation run: %w", err)
	}
	return t, true, nil
}

// Cursor is how far the provider's record was read; ok is false before
// the first run.
func (r *Runs) Cursor(ctx context.Context, provider string) (time.Time, bool, error) {
	t, err := r.q.Cursor(ctx, provider)
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
	err := r.q.SetCursor(ctx, sqlcdb.SetCursorParams{Provider: provider, SyncedUntil: until, LastEventID: lastEventID, RunID: runID})
	if err != nil {
		return fmt.Errorf("store psp reconciliation cursor: %w", err)
	}
	return nil
}

// Known returns which of ids are stored already.
func (r *Runs) Known(ctx context.Context, provider string, ids []string) (map[string]bool, error) {
	known, err := r.q.KnownEvents(ctx, sqlcdb.KnownEventsParams{Provider: provider, EventIDs: ids})
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
	Settled     bool
	Amount      int64
	Currency    string
	Destination string
	// PSPReference is the PSP object recorded for it ("" before one is):
	// for a payout to a connected account's external account, that
	// account's payout.
	PSPReference string
	// ExternalAccount is the connected account's bank account or card the
	// payout goes to ("" when the payout is one object at the PSP): the
	// payout is then a transfer to Destination, recorded in PSPTransfer,
	// and a payout on that account to ExternalAccount.
	ExternalAccount string
	PSPTransfer     string
	// Account is the connected account the compared objects must be on
	// ("" the platform): set on the row a connected payout is compared with.
	Account string
}

// transferLevel is the row a two-step payout's transfer is compared with:
// to the connected account, recorded in psp_transfer.
func (p payoutRow) transferLevel() payoutRow {
	p.PSPReference = p.PSPTransfer
	return p
}

// connectedLevel is the row a two-step payout's connected payout is
// compared with: on the connected account, to its external account,
// recorded in psp_reference.
func (p payoutRow) connectedLevel() payoutRow {
	p.Account, p.Destination = p.Destination, p.ExternalAccount
	return p
}

func (r *Runs) payouts(ctx context.Context, ids []string, grace time.Duration) (map[string]payoutRow, error) {
	rows, err := r.q.Payouts(ctx, sqlcdb.PayoutsParams{IDs: ids, GraceSeconds: grace.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("read payouts: %w", err)
	}
	out := make(map[string]payoutRow, len(rows))
	for _, p := range rows {
		out[p.ID] = payoutRow{Status: p.Status, Settled: p.Settled, Amount: p.Amount, Currency: p.Currency,
			Destination: p.Destination, PSPReference: p.PSPReference, ExternalAccount: p.ExternalAccount, PSPTransfer: p.PspTransfer}
	}
	return out, nil
}

// connected reads the provider's payouts to a connected account's external
// account that are in flight or changed since since (the newest limit),
// by id, with their ids newest first.
func (r *Runs) connected(ctx context.Context, provider string, since time.Time, grace time.Duration, limit int) (map[string]payoutRow, []string, error) {
	rows, err := r.q.ConnectedPayouts(ctx, sqlcdb.ConnectedPayoutsParams{Provider: provider, GraceSeconds: grace.Seconds(),
		InFlight: payoutstate.Names(payoutstate.Status.InFlight), Since: since, MaxRows: limit})
	if err != nil {
		return nil, nil, fmt.Errorf("read payouts to connected accounts: %w", err)
	}
	out := make(map[string]payoutRow, len(rows))
	ids := make([]string, 0, len(rows))
	for _, p := range rows {
		out[p.ID] = payoutRow{Status: p.Status, Settled: p.Settled, Amount: p.Amount, Currency: p.Currency,
			Destination: p.Destination, PSPReference: p.PSPReference, ExternalAccount: p.ExternalAccount, PSPTransfer: p.PspTransfer}
		ids = append(ids, p.ID)
	}
	return out, ids, nil
}

type succeededPayout struct {
	ID, PSPReference string
	// Row is the payout as compareMoney needs it.
	Row payoutRow
}

func (r *Runs) succeeded(ctx context.Context, provider string, since time.Time, limit int) ([]succeededPayout, error) {
	rows, err := r.q.SucceededPayouts(ctx, sqlcdb.SucceededPayoutsParams{Provider: provider,
		Status: string(payoutstate.Succeeded), Since: since, MaxRows: limit})
	if err != nil {
		return nil, fmt.Errorf("read succeeded payouts: %w", err)
	}
	out := make([]succeededPayout, len(rows))
	for i, p := range rows {
		out[i] = succeededPayout{ID: p.ID, PSPReference: p.PSPReference, Row: payoutRow{Status: string(payoutstate.Succeeded), Settled: true,
			Amount: p.Amount, Currency: p.Currency, Destination: p.Destination}}
	}
	return out, nil
}

type storedEvent struct {
	EventID string
	Payload []byte
}

func (r *Runs) storedReturns(ctx context.Context, provider string, since time.Time, grace time.Duration, limit int) ([]storedEvent, error) {
	rows, err := r.q.StoredReturns(ctx, sqlcdb.StoredReturnsParams{
		Provider: provider, Since: since, GraceSeconds: grace.Seconds(), MaxRows: limit})
	if err != nil {
		return nil, fmt.Errorf("read stored refunds and disputes: %w", err)
	}
	out := make([]storedEvent, len(rows))
	for i, e := range rows {
		out[i] = storedEvent{EventID: e.EventID, Payload: e.Payload}
	}
	return out, nil
}

func (r *Runs) returnPosted(ctx context.Context, provider, kind, objectID string) (bool, error) {
	ok, err := r.q.ReturnPosted(ctx, sqlcdb.ReturnPostedParams{Provider: provider, Kind: kind, ObjectID: objectID})
	if err != nil {
		return false, fmt.Errorf("read payment returns: %w", err)
	}
	return ok, nil
}
