package backoff

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/aegis-payments/aegis/pkg/config"
)

// Policy is a retry schedule.
type Policy struct {
	// Base is the ceiling of the first retry's delay.
	Base time.Duration
	// Multiplier grows the ceiling per attempt (2 doubles it).
	Multiplier float64
	// Max caps the ceiling.
	Max time.Duration
	// MaxAttempts is how many attempts are made in all before giving up.
	MaxAttempts int
	// Jitter picks the delay in [0, ceiling]; nil means uniform random. Tests
	// pass a deterministic one.
	Jitter func(ceiling time.Duration) time.Duration
}

// Validate reports a policy that cannot work.
func (p Policy) Validate() error {
	var errs []error
	if p.Base <= 0 {
		errs = append(errs, config.Invalid("Base", "must be positive"))
	}
	if p.Multiplier < 1 {
		errs = append(errs, config.Invalid("Multiplier", "must be at least 1"))
	}
	if p.Max < p.Base {
		errs = append(errs, config.Invalid("Max", "must be at least %s", config.Ref("Base")))
	}
	if p.MaxAttempts < 1 {
		errs = append(errs, config.Invalid("MaxAttempts", "must be at least 1"))
	}
	return errors.Join(errs...)
}

// Ceiling is the largest delay before retry number retry (1 for the first
// retry): min(Max, Base × Multiplier^(retry-1)).
func (p Policy) Ceiling(retry int) time.Duration {
	if retry < 1 {
		retry = 1
	}
	c := float64(p.Base) * math.Pow(p.Multiplier, float64(retry-1))
	if c > float64(p.Max) || math.IsInf(c, 0) || math.IsNaN(c) {
		return p.Max
	}
	return time.Duration(c)
}

// Delay is the jittered wait before retry number retry.
func (p Policy) Delay(retry int) time.Duration {
	c := p.Ceiling(retry)
	if p.Jitter != nil {
		return p.Jitter(c)
	}
	if c <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(c) + 1))
}

// Exhausted reports whether attempts made so far use up the policy.
func (p Policy) Exhausted(attempts int) bool {
	return attempts >= p.MaxAttempts
}

// Sleep waits d or until ctx is done, and reports whether d passed: the
// wait between two attempts of a loop that must stop at shutdown.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
