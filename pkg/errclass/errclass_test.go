package errclass

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestOf(t *testing.T) {
	t.Parallel()
	base := errors.New("boom")
	cases := []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, ""},
		{"unclassified is transient", base, Transient},
		{"permanent survives wrapping", fmt.Errorf("call psp: %w", AsPermanent(base)), Permanent},
		{"poison", AsPoison(base), Poison},
		{"canceled", fmt.Errorf("op: %w", context.Canceled), Canceled},
		{"explicit class wins over cancel", AsPermanent(context.Canceled), Permanent},
		{"breaker", New(BreakerOpen, base), BreakerOpen},
	}
	for _, tc := range cases {
		if got := Of(tc.err); got != tc.want {
			t.Errorf("%s: Of = %q, want %q", tc.name, got, tc.want)
		}
	}
	if !errors.Is(AsPermanent(base), base) {
		t.Fatal("classified errors must unwrap to their cause")
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("psp: %w", RetryAfter(errors.New("429"), 3*time.Second))
	if Of(err) != Transient {
		t.Fatalf("RetryAfter is transient, got %q", Of(err))
	}
	if d, ok := RetryAfterOf(err); !ok || d != 3*time.Second {
		t.Fatalf("RetryAfterOf = %v, %v", d, ok)
	}
	if _, ok := RetryAfterOf(AsTransient(errors.New("x"))); ok {
		t.Fatal("plain transient has no retry-after")
	}
}

func TestExplicit(t *testing.T) {
	t.Parallel()
	if c, ok := Explicit(fmt.Errorf("x: %w", AsPermanent(errors.New("p")))); !ok || c != Permanent {
		t.Fatalf("Explicit = %q, %v", c, ok)
	}
	if _, ok := Explicit(errors.New("plain")); ok {
		t.Fatal("an unmarked error has no explicit class")
	}
}
