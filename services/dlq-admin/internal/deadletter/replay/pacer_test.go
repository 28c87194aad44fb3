package replay

import (
	"context"
	"testing"
	"time"
)

// The first slot is free, the next one every later; a cancelled context
// ends a wait.
func TestPacerSpacesSlots(t *testing.T) {
	t.Parallel()
	p := &pacer{every: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	if err := p.wait(ctx); err != nil {
		t.Fatalf("the first slot is free: %v", err)
	}
	if next := p.nextSlot(); time.Until(next) < 59*time.Minute {
		t.Fatalf("the second slot is an hour away, got %v", time.Until(next))
	}
	cancel()
	if err := p.wait(ctx); err == nil {
		t.Fatal("only the cancel ends the wait for the second slot")
	}
}

// A slow letter earns no burst: the slot after a late one is every after now.
func TestPacerNoBurstAfterASlowLetter(t *testing.T) {
	t.Parallel()
	p := &pacer{every: time.Hour, next: time.Now().Add(-time.Hour)}
	if err := p.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Until(p.nextSlot()); d < 59*time.Minute {
		t.Fatalf("next slot in %v, want about an hour", d)
	}
}
