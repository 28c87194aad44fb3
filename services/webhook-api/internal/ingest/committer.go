package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/aegis-payments/aegis/pkg/panics"
)

// Committer commits webhooks in groups (group commit): concurrent requests
// share one transaction and one WAL flush instead of paying for one each.
// Nothing waits to fill a group: a committer takes whatever is queued when it
// is free, so an idle service commits every webhook alone, at once, and a
// busy one commits them together. Each caller is still answered only after
// the transaction holding its webhook committed.
type Committer struct {
	panics   *panics.Counter
	logger   *slog.Logger
	store    *Store
	queue    chan *request
	workers  int
	maxGroup int
	wg       sync.WaitGroup
}

type request struct {
	p    Pending
	done chan Saved
}

// NewCommitter returns a committer with workers concurrent transactions of
// at most maxGroup webhooks each.
func NewCommitter(store *Store, workers, maxGroup int) (*Committer, error) {
	if workers < 1 || maxGroup < 1 {
		return nil, fmt.Errorf("committer needs at least one worker and a group size of at least 1")
	}
	return &Committer{store: store, queue: make(chan *request, workers*maxGroup), workers: workers, maxGroup: maxGroup,
		logger: slog.New(slog.DiscardHandler)}, nil
}

// WithPanics counts and logs the panics the committer recovers (call before
// Start). A panic while committing a group answers every webhook of that
// group with the error (a 5xx: nothing was committed, the PSP retries) and
// the committer goes on with the next group; without this recovery the
// goroutine's panic would kill the process with every queued webhook.
func (c *Committer) WithPanics(p *panics.Counter, logger *slog.Logger) *Committer {
	c.panics, c.logger = p, logger
	return c
}

// Start runs the committers until Stop.
func (c *Committer) Start() {
	for range c.workers {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.work()
		}()
	}
}

// Stop lets the committers finish what is queued and waits for them. Call it
// after the HTTP server has shut down, so no request is still enqueueing.
func (c *Committer) Stop() {
	close(c.queue)
	c.wg.Wait()
}

// Save queues p and waits for its commit.
func (c *Committer) Save(ctx context.Context, p Pending) (Saved, error) {
	r := &request{p: p, done: make(chan Saved, 1)}
	select {
	case c.queue <- r:
	case <-ctx.Done():
		return Saved{}, ctx.Err()
	}
	// Once queued the webhook is committed or refused whether or not the
	// caller is still waiting; a PSP that gave up retries and is told
	// "duplicate".
	select {
	case s := <-r.done:
		return s, s.Err
	case <-ctx.Done():
		return Saved{}, ctx.Err()
	}
}

func (c *Committer) work() {
	for first := range c.queue {
		group := []*request{first}
	fill:
		for len(group) < c.maxGroup {
			select {
			case r, ok := <-c.queue:
				if !ok {
					break fill
				}
				group = append(group, r)
			default:
				break fill
			}
		}
		c.commit(group)
	}
}

func (c *Committer) commit(group []*request) {
	// Requests outlive their HTTP contexts here on purpose: a half-committed
	// group must not be cancelled by one client hanging up.
	ctx := context.Background()
	pending := make([]Pending, len(group))
	for i, r := range group {
		pending[i] = r.p
	}
	results, perr := c.save(ctx, pending)
	if len(group) > 1 && (perr != nil || results[0].Err != nil) {
		// One bad webhook must not fail its neighbours: try each alone.
		results = make([]Saved, len(group))
		for i, r := range group {
			one, err := c.save(ctx, []Pending{r.p})
			if err != nil {
				results[i] = Saved{Err: err}
				continue
			}
			results[i] = one[0]
		}
		perr = nil
	}
	for i, r := range group {
		if perr != nil {
			r.done <- Saved{Err: perr}
			continue
		}
		r.done <- results[i]
	}
}

// save is SaveGroup with a panic turned into an error (the transaction was
// rolled back by database.InTx on the way up).
func (c *Committer) save(ctx context.Context, pending []Pending) ([]Saved, error) {
	var results []Saved
	err := c.panics.Call(ctx, c.logger, "webhook-api/committer", func() error {
		results = c.store.SaveGroup(ctx, pending)
		return nil
	})
	return results, err
}
