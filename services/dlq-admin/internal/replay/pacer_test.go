package replay

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// A long wait between letters keeps the job's lease alive, and a cancelled
// context ends the wait.
func TestPacerBeatsWhileWaiting(t *testing.T) {
	t.Parallel()
	p := &pacer{every: time.Hour, beatEvery: time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var beats atomic.Int32
	beat := func(context.Context) error {
		if beats.Add(1) == 3 {
			cancel()
		}
		return nil
	}
	if err := p.wait(ctx, beat); err != nil {
		t.Fatalf("the first slot is free: %v", err)
	}
	if err := p.wait(ctx, beat); err == nil {
		t.Fatal("the second slot is an hour away; only the cancel ends the wait")
	}
	if n := beats.Load(); n != 3 {
		t.Fatalf("want 3 heartbeats before the cancel, got %d", n)
	}
}

// A lost lease found by a heartbeat stops the wait with that error.
func TestPacerStopsWhenTheLeaseIsLost(t *testing.T) {
	t.Parallel()
	p := &pacer{every: time.Hour, beatEvery: time.Millisecond, next: time.Now().Add(time.Hour)}
	err := p.wait(context.Background(), func(context.Context) error { return errLeaseLost })
	if !errors.Is(err, errLeaseLost) {
		t.Fatalf("want errLeaseLost, got %v", err)
	}
}
