// Package backoff computes retry delays: exponential growth with a cap and
// full jitter (a uniformly random delay between 0 and the capped exponential),
// as AWS's "Exponential Backoff And Jitter" recommends, so that a fleet of
// retries after an outage spreads out instead of arriving in waves.
//
// The schedule is configuration (relay: 1s base, cap 30s, 6 attempts; PSP
// calls: 5s base, ×2, cap 60s, 5 attempts), never a constant in the caller.
package backoff
