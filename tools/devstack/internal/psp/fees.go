package psp

import "fmt"

// What the PSPs charge for a successful card payment, in minor units of
// the payment's currency. The customer is credited the payment's full
// amount; the fee is the platform's cost: Stripe reports it in the
// charge's balance transaction (balancetxn.go).
//
// Stripe: its standard US card pricing, 2.9% + 30 (Config.StripeCardFee),
// rounded to the nearest unit, a half up, as Stripe rounds its fees. It is
// applied to every currency as is: no conversion fee, no international
// card surcharge.

// FeeRate is a PSP's price for one payment: BasisPoints of the amount
// (290 is 2.9%) plus Fixed, in minor units of the payment's currency.
type FeeRate struct {
	BasisPoints int64 `json:"basis_points"`
	Fixed       int64 `json:"fixed"`
}

// Stripe's standard US card pricing: 2.9% + 30 cents.
const (
	DefaultStripeFeeBasisPoints int64 = 290
	DefaultStripeFeeFixed       int64 = 30
)

func (r FeeRate) validate() error {
	if r.BasisPoints < 0 || r.BasisPoints > 10_000 {
		return fmt.Errorf("basis points must be between 0 and 10000, got %d", r.BasisPoints)
	}
	if r.Fixed < 0 {
		return fmt.Errorf("fixed fee must not be negative, got %d", r.Fixed)
	}
	return nil
}

// of is the fee on amount.
func (r FeeRate) of(amount int64) int64 {
	return percentOf(amount, r.BasisPoints) + r.Fixed
}

// percentOf is bps basis points of amount (not negative), rounded to the
// nearest unit with a half rounded up, without overflowing for any amount.
func percentOf(amount, bps int64) int64 {
	whole, rest := amount/10_000, amount%10_000
	return whole*bps + (rest*bps+5_000)/10_000
}
