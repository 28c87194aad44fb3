package backoff

import (
	"context"
	"testing"
	"time"
)

func TestCeilingGrowsAndCaps(t *testing.T) {
	t.Parallel()
	p := Policy{Base: time.Second, Multiplier: 2, Max: 30 * time.Second, MaxAttempts: 6}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i, w := range want {
		if got := p.Ceiling(i + 1); got != w*time.Second {
			t.Errorf("Ceiling(%d) = %s, want %s", i+1, got, w*time.Second)
		}
	}
	if got := p.Ceiling(10_000); got != 30*time.Second {
		t.Errorf("huge retry must cap, got %s", got)
	}
}

func TestDelayIsFullJitterWithinCeiling(t *testing.T) {
	t.Parallel()
	p := Policy{Base: 5 * time.Second, Multiplier: 2, Max: 60 * time.Second, MaxAttempts: 5}
	seenLow, seenHigh := false, false
	for range 2000 {
		d := p.Delay(3)
		if d < 0 || d > 20*time.Second {
			t.Fatalf("Delay(3) = %s outside [0, 20s]", d)
		}
		seenLow = seenLow || d < 5*time.Second
		seenHigh = seenHigh || d > 15*time.Second
	}
	if !seenLow || !seenHigh {
		t.Fatal("full jitter should spread over the whole range")
	}
}

func TestValidateAndExhausted(t *testing.T) {
	t.Parallel()
	if err := (Policy{}).Validate(); err == nil {
		t.Fatal("zero policy must be invalid")
	}
	p := Policy{Base: time.Second, Multiplier: 2, Max: time.Minute, MaxAttempts: 3,
		Jitter: func(c time.Duration) time.Duration { return c }}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.Delay(2) != 2*time.Second {
		t.Fatal("custom jitter must be used")
	}
	if p.Exhausted(2) || !p.Exhausted(3) {
		t.Fatal("Exhausted off by one")
	}
}

func TestSleepWaitsOrStopsAtCancel(t *testing.T) {
	start := time.Now()
	if !Sleep(context.Background(), 20*time.Millisecond) {
		t.Fatal("Sleep reported a cancel that did not happen")
	}
	// Waiting its duration is what Sleep does: timers never fire early, so
	// the lower bound holds on any machine.
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Fatalf("Sleep returned after %s, before its 20ms", waited)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) { // returns at all: it did not sleep the hour
		t.Fatal("Sleep reported an hour passed on a canceled context")
	}
}
