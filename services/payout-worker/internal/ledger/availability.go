package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
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

// checkAvailable refuses a payout of amount when the wallet covers it only
// with credits not yet available. It takes the wallet's row lock, so the
// answer holds until the caller's transaction ends. A wallet that cannot
// cover amount at all is left to the debit (plain ErrInsufficientFunds).
func checkAvailable(ctx context.Context, tx pgx.Tx, userID, currency string, amount int64) error {
	var balance, pending int64
	err := tx.QueryRow(ctx, sqlLockedBalance, userID, currency).Scan(&balance)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock wallet of %s: %w", userID, err)
	}
	if balance < amount {
		return nil
	}
	if err := tx.QueryRow(ctx, sqlUnavailable, userID, currency).Scan(&pending); err != nil {
		return fmt.Errorf("unavailable credits of %s: %w", userID, err)
	}
	if balance-pending < amount {
		return fmt.Errorf("%w: %d of %d %s available", ErrNotYetAvailable, max(0, balance-pending), balance, currency)
	}
	return nil
}
