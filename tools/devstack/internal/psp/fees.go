package psp

import (
	"fmt"
	"strings"
)

// What the PSPs charge for a successful card payment, in minor units of
// the payment's currency. The customer is credited the payment's full
// amount; the fee is the platform's cost: Stripe reports it in the
// charge's balance transaction (balancetxn.go), Paystack in the
// transaction's fees.
//
// Stripe: its standard US card pricing, 2.9% + 30 (Config.StripeCardFee),
// rounded to the nearest unit, a half up, as Stripe rounds its fees. It is
// applied to every currency as is: no conversion fee, no international
// card surcharge.
//
// Paystack (Nigeria): local cards 1.5% + ₦100, the ₦100 waived below
// ₦2,500, the whole capped at ₦2,000. Other currencies at their country's
// local card rate: GHS 1.95%, KES 2.9%, ZAR 2.9% + R1 (VAT not added);
// USD, and any other currency, 3.9% (Paystack Nigeria's USD rate).
// Rounded to the nearest kobo (or cent), a half up.

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

// Paystack's Nigerian local card pricing, in kobo.
const (
	paystackLocalBasisPoints int64 = 150
	paystackLocalFlat        int64 = 10_000  // ₦100
	paystackFlatWaivedBelow  int64 = 250_000 // ₦2,500
	paystackLocalCap         int64 = 200_000 // ₦2,000
)

// paystackFee is Paystack's fee on a successful card payment of amount in
// currency (either case).
func paystackFee(amount int64, currency string) int64 {
	switch strings.ToLower(currency) {
	case "ngn":
		fee := percentOf(amount, paystackLocalBasisPoints)
		if amount >= paystackFlatWaivedBelow {
			fee += paystackLocalFlat
		}
		return min(fee, paystackLocalCap)
	case "ghs":
		return percentOf(amount, 195)
	case "kes":
		return percentOf(amount, 290)
	case "zar":
		return percentOf(amount, 290) + 100
	default: // usd and anything else
		return percentOf(amount, 390)
	}
}
