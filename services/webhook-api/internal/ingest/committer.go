package ingest

import (
	"context"
	"fmt"
	"sync"
)

// Committer commits webhooks in groups (group commit): concurrent requests
// share one transaction and one WAL flush instead of paying for one each.
// Nothing waits to fill a group: a committer takes whatever is queued when it
// is free, so an idle service commits every webhook alone, at once, and a
// busy one commits them together. Each caller is still answered only after
// the transaction holding its webhook committed.
type Committer struct {
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
	return &Committer{store: store, queue: make(chan *request, workers*maxGroup), workers: workers, maxGroup: maxGroup}, nil
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
	results := c.store.SaveGroup(ctx, pending)
	if len(group) > 1 && results[0].Err != nil {
		// One bad webhook must not fail its neighbours: try each alone.
		for i, r := range group {
			results[i] = c.store.SaveGroup(ctx, []Pending{r.p})[0]
		}
	}
	for i, r := range group {
		r.done <- results[i]
	}
}
