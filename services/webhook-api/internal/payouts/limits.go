package payouts

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrLimitExceeded is a payout over a configured limit (422 limit_exceeded).
var ErrLimitExceeded = errors.New("payout limit exceeded")

// LimitError says which limit a payout would exceed.
type LimitError struct {
	Limit    string // "per_payout" or "daily"
	Currency string
	Max      int64
	// Used is what the user was already paid out in the window (daily).
	Used int64
}

func (e *LimitError) Error() string {
	if e.Limit == "daily" {
		return fmt.Sprintf("the user's payouts in %s over the last 24 hours would exceed %d (already %d)", e.Currency, e.Max, e.Used)
	}
	return fmt.Sprintf("a payout in %s may be at most %d", e.Currency, e.Max)
}

// Is makes errors.Is(err, ErrLimitExceeded) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimitExceeded }

// Limits are per-currency maximums in minor units. A currency without an
// entry has no limit; the zero Limits limits nothing (the default).
type Limits struct {
	// PerPayout caps one payout.
	PerPayout map[string]int64
	// Daily caps what one user is paid out in a currency over a rolling 24
	// hours: accepted payouts that did not fail count, so money on its way
	// out counts before the PSP confirms it.
	Daily map[string]int64
	// NewDestination caps, per currency, what a destination registered less
	// than CoolingOff ago may be paid in all (payouts that did not fail
	// count). A stolen API token can register a destination and pay to it
	// at once; the cap bounds what it takes before someone notices and
	// disables the destination. A currency without an entry, or a zero
	// CoolingOff, is not held back (the off-switch).
	NewDestination map[string]int64
	CoolingOff     time.Duration
}

// ErrCoolingOff is a payout over a new destination's cap (422
// destination_cooling_off).
var ErrCoolingOff = errors.New("destination in its cooling-off period")

// CurrencyError: the destination receives another currency than the
// payout's (its PSP said so when it was registered).
type CurrencyError struct {
	Currency string
	Receives string
}

func (e *CurrencyError) Error() string {
	return fmt.Sprintf("the destination receives %s, not %s: its PSP pays it only in the currency it holds", e.Receives, e.Currency)
}

// CoolingOffError says what a new destination may still receive, and when
// its cooling-off ends.
type CoolingOffError struct {
	Currency string
	Max      int64
	// Paid is what its payouts that did not fail already add up to.
	Paid  int64
	Until time.Time
}

func (e *CoolingOffError) Error() string {
	return fmt.Sprintf("the destination was registered recently: until %s it may be paid at most %d %s in all (already %d)",
		e.Until.UTC().Format(time.RFC3339), e.Max, e.Currency, e.Paid)
}

// Is makes errors.Is(err, ErrCoolingOff) true.
func (e *CoolingOffError) Is(target error) bool { return target == ErrCoolingOff }

// ParseLimit reads "usd:500000,ngn:100000000" (currency:amount in minor
// units). Errors name the entry; the caller names the variable.
func ParseLimit(spec string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		cur, amount, ok := strings.Cut(item, ":")
		cur = strings.ToLower(strings.TrimSpace(cur))
		n, err := strconv.ParseInt(strings.TrimSpace(amount), 10, 64)
		if !ok || !currencyRE.MatchString(cur) || err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: want currency:amount, a three-letter currency and a positive amount in minor units", item)
		}
		if _, dup := out[cur]; dup {
			return nil, fmt.Errorf("currency %s listed twice", cur)
		}
		out[cur] = n
	}
	return out, nil
}
