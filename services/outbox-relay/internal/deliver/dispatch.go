package deliver

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/services/outbox-relay/internal/deliver/sqlcdb"
)

// endpoint is what an attempt needs of its endpoint.
type endpoint struct {
	id             uuid.UUID
	url            string
	secret         string
	previousSecret string // empty when it no longer signs
	legacySecret   string
}

// RunDispatch claims and attempts due deliveries until ctx is done; the
// attempts in flight are then abandoned (their leases make them due again)
// and it returns nil.
func (d *Deliverer) RunDispatch(ctx context.Context) error {
	d.logger.Info("outbound dispatcher started", "senders", d.cfg.Senders, "per_endpoint", d.cfg.PerEndpoint)
	var wg sync.WaitGroup
	defer wg.Wait()
	tick := time.NewTicker(d.cfg.PollInterval)
	defer tick.Stop()
	for {
		if err := d.dispatch(ctx, &wg); err != nil && ctx.Err() == nil {
			d.logger.Error("outbound dispatch", "error", err.Error())
		}
		select {
		case <-ctx.Done():
			d.logger.Info("outbound dispatcher stopped")
			return nil
		case <-tick.C:
		case <-d.wake:
		}
	}
}

// dispatch claims what this process has room for and starts its attempts.
func (d *Deliverer) dispatch(ctx context.Context, wg *sync.WaitGroup) error {
	if d.free() == 0 {
		return nil
	}
	due, err := d.q.DueEndpoints(ctx)
	if err != nil {
		return fmt.Errorf("due endpoints: %w", err)
	}
	// No endpoint is always served first when there is not room for all.
	rand.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	for _, row := range due {
		want := d.room(row.ID)
		if want == 0 {
			continue
		}
		claimed, err := d.claim(ctx, row, want)
		if err != nil {
			return err
		}
		ep := endpoint{id: row.ID, url: row.Url, secret: row.Secret}
		if row.PreviousActive && row.PreviousSecret != nil {
			ep.previousSecret = *row.PreviousSecret
		}
		if row.LegacySecret != nil {
			ep.legacySecret = *row.LegacySecret
		}
		for _, c := range claimed {
			wg.Go(func() {
				defer d.release(ep.id)
				d.attempt(ctx, ep, c)
			})
		}
	}
	return nil
}

// free is how many more attempts this process may start.
func (d *Deliverer) free() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg.Senders - d.total
}

// room reserves up to what this process may start for endpoint id now;
// claim gives back what it did not use.
func (d *Deliverer) room(id uuid.UUID) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := min(d.cfg.Senders-d.total, d.cfg.PerEndpoint-d.inFlight[id])
	if n <= 0 {
		return 0
	}
	d.inFlight[id] += n
	d.total += n
	return n
}

// giveBack returns n reserved but unused slots of endpoint id.
func (d *Deliverer) giveBack(id uuid.UUID, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inFlight[id] -= n
	d.total -= n
	if d.inFlight[id] <= 0 {
		delete(d.inFlight, id)
	}
}

// release frees the slot of one finished attempt and wakes the dispatcher
// to fill it.
func (d *Deliverer) release(id uuid.UUID) {
	d.giveBack(id, 1)
	d.Wake()
}

// claim takes up to want due deliveries of one endpoint in one
// transaction, within its rate limit: a token bucket on its health row
// (rate_limit tokens at most, rate_limit more per second) that every relay
// shares. What it did not claim of want is given back.
func (d *Deliverer) claim(ctx context.Context, ep sqlcdb.DueEndpointsRow, want int) (rows []sqlcdb.ClaimRow, err error) {
	defer func() { d.giveBack(ep.ID, want-len(rows)) }()
	err = database.InTx(ctx, d.pool, func(tx pgx.Tx) error {
		q := d.q.WithTx(tx)
		n := want
		var bucket sqlcdb.TokensRow
		if ep.RateLimit != nil {
			rate := float64(*ep.RateLimit)
			if err := q.EnsureHealth(ctx, sqlcdb.EnsureHealthParams{EndpointID: ep.ID, Tokens: rate}); err != nil {
				return err
			}
			if err := q.LockHealth(ctx, ep.ID); err != nil {
				return fmt.Errorf("lock its bucket: %w", err)
			}
			var err error
			if bucket, err = q.Tokens(ctx, sqlcdb.TokensParams{Rate: rate, EndpointID: ep.ID}); err != nil {
				return fmt.Errorf("tokens: %w", err)
			}
			if n = min(n, int(math.Floor(bucket.Available))); n <= 0 {
				return nil
			}
		}
		got, err := q.Claim(ctx, sqlcdb.ClaimParams{EndpointID: ep.ID, N: n, LeaseSeconds: d.cfg.Lease.Seconds()})
		if err != nil {
			return err
		}
		if ep.RateLimit != nil {
			if err := q.SpendTokens(ctx, sqlcdb.SpendTokensParams{Tokens: bucket.Available - float64(len(got)),
				TakenAt: bucket.TakenAt, EndpointID: ep.ID}); err != nil {
				return fmt.Errorf("spend tokens: %w", err)
			}
		}
		rows = got
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries of endpoint %s: %w", ep.ID, err)
	}
	return rows, nil
}
