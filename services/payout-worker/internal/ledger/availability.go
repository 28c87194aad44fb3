package ledger

import (
	"fmt"
	"time"
)

// ErrNotYetAvailable: the wallet holds the amount, but part of it comes from
// credits still inside the settlement delay. It is an ErrInsufficientFunds.
var ErrNotYetAvailable = fmt.Errorf("%w: funds not yet available (settlement delay)", ErrInsufficientFunds)

// WithSettlementDelay makes credits available for payouts only d after
// they are posted (CREDIT_SETTLEMENT_DELAY; 0, the default, is at once).
// Call it before the Ledger is used.
func (l *Ledger) WithSettlementDelay(d time.Duration) *Ledger {
	l.settlementDelay = d
	return l
}

// unavailable says why a hold of p was refused when the wallet holds the
// amount (balance, under the hold's row lock) but pending of it comes from
// credits still inside the settlement delay; nil when the balance itself
// falls short (plain ErrInsufficientFunds).
func unavailable(p Payout, balance, pending int64) error {
	if balance < p.Amount || balance-pending >= p.Amount {
		return nil
	}
	return fmt.Errorf("%w: %d of %d %s available", ErrNotYetAvailable, max(0, balance-pending), balance, p.Currency)
}
