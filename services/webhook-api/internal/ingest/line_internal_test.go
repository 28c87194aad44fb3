package ingest

import (
	"testing"
	"time"

	"github.com/aegis-payments/aegis/pkg/lifecycle"
)

// The line's bound starts at four full groups per committer, then follows
// the committers' measured rate at full groups, between one full group per
// committer and the queue's size; a group that was not full says nothing
// about capacity.
func TestLineLimitFollowsTheMeasuredRate(t *testing.T) {
	c, err := NewCommitter(nil, CommitterConfig{Workers: 2, MaxGroup: 10}, lifecycle.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.lineLimit.Load(); got != 80 {
		t.Fatalf("before any measurement the line holds %d, want 4 groups × 2 committers × 10 = 80", got)
	}
	c.measured(3, time.Millisecond) // 3000/s, but the group was not full
	if got := c.lineLimit.Load(); got != 80 {
		t.Fatalf("a partial group moved the bound to %d", got)
	}
	c.measured(10, 20*time.Millisecond) // 500/s per committer: 1000/s × 250ms
	if got := c.lineLimit.Load(); got != 250 {
		t.Fatalf("at 1000 webhooks/s the line holds %d, want 250", got)
	}
	for range 200 {
		c.measured(10, time.Millisecond) // 10,000/s per committer
	}
	if got, want := c.lineLimit.Load(), int64(cap(c.queue)); got != want {
		t.Fatalf("at 20,000/s the line holds %d, want the queue's size %d", got, want)
	}
	for range 200 {
		c.measured(10, time.Second) // Postgres slowed down: 10/s
	}
	if got := c.lineLimit.Load(); got != 20 {
		t.Fatalf("a slow Postgres left the bound at %d, want the least, a group per committer: 20", got)
	}
	c.inLine.Store(20)
	if !c.Full() || c.admit() {
		t.Fatal("a full line admits a webhook")
	}
	c.inLine.Store(19)
	if c.Full() || !c.admit() {
		t.Fatal("a line with a free place refuses a webhook")
	}
}

// A configured least bound holds however slow the committers are measured.
func TestLineLimitKeepsTheConfiguredLeast(t *testing.T) {
	c, err := NewCommitter(nil, CommitterConfig{Workers: 1, MaxGroup: 4, MinLine: 1000}, lifecycle.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	c.measured(4, time.Second)
	if got := c.lineLimit.Load(); got != 1000 {
		t.Fatalf("the line holds %d, want the configured 1000", got)
	}
	if cap(c.queue) < 1000 {
		t.Fatalf("a queue of %d cannot hold the line of 1000 without blocking", cap(c.queue))
	}
}

// Admission is bounded by time: a webhook is refused when the commits
// ahead of it and its own, at the measured time per commit, exceed the
// budget, or when every committer has been stuck in one commit for
// stallFactor budgets; the first round is always admitted, so a slow spell
// cannot refuse webhooks for good.
func TestAdmissionIsBoundedByTheExpectedWait(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	c, err := NewCommitter(nil, CommitterConfig{Workers: 1, MaxGroup: 10, MinLine: 1000},
		lifecycle.Deps{Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	c.committed(100 * time.Millisecond)
	for n, late := range map[int64]bool{1: false, 10: false, 11: false, 20: false, 21: true, 500: true} {
		if got := c.tooLate(n); got != late {
			t.Errorf("webhook %d in line at 100ms per commit of 10: too late %v, want %v (budget %s)", n, got, late, QueueBudget)
		}
	}
	c.inLine.Store(19)
	if c.Full() || !c.admit() {
		t.Fatal("the 20th webhook (two commits, 200ms) was refused")
	}
	if !c.Full() || c.admit() {
		t.Fatal("the 21st webhook (three commits, 300ms) was admitted: the count bound of 1000 is not the only one")
	}

	// A slow spell, then the line empties: the first group is admitted.
	for range 20 {
		c.committed(5 * time.Second)
	}
	c.inLine.Store(0)
	if !c.admit() {
		t.Fatal("an empty line refused a webhook after a slow spell: nothing would be measured again")
	}
	if c.admit(); c.inLine.Load() != 2 {
		t.Fatal("the first group's places are refused after a slow spell")
	}
	c.inLine.Store(10)
	if c.admit() {
		t.Fatal("a second round at 5s per commit was admitted")
	}

	// Postgres stalls: the one committer is in a commit for longer than
	// the budget; nothing is admitted, even into the first round.
	c.inLine.Store(0)
	c.busySince[0].Store(now.Add(-stallFactor*QueueBudget - time.Millisecond).UnixNano())
	if !c.Full() || c.admit() {
		t.Fatal("a webhook was admitted while the only committer is stuck beyond the budget")
	}
	c.busySince[0].Store(now.Add(-2 * QueueBudget).UnixNano())
	if c.Full() || !c.admit() {
		t.Fatal("a commit slow for two budgets (a busy host, no stall) shut the door")
	}
	c.busySince[0].Store(0)
	c.inLine.Store(0)
	if !c.admit() {
		t.Fatal("an idle committer refused a webhook")
	}
}
