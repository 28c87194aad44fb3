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
