package wallets

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound means the user has no wallet (in that currency).
var ErrNotFound = errors.New("wallet not found")

const sqlBalances = `
SELECT id, currency, balance, owed, updated_at FROM wallets
WHERE kind = 'user' AND owner = $1
ORDER BY updated_at DESC, currency`

const sqlEntries = `
SELECT t.id::text, t.kind, t.reference, e.amount, e.currency, e.created_at
FROM ledger_entries e JOIN ledger_transactions t ON t.id = e.transaction_id
WHERE e.wallet_id = $1
ORDER BY e.id DESC
LIMIT $2`

// Balance is one currency's wallet.
type Balance struct {
	Currency  string    `json:"currency"`
	Balance   int64     `json:"balance"`
	Owed      int64     `json:"owed"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Entry is one ledger entry on the wallet.
type Entry struct {
	TransactionID string    `json:"transaction_id"`
	Kind          string    `json:"kind"`
	Reference     string    `json:"reference"`
	Amount        int64     `json:"amount"`
	Currency      string    `json:"currency"`
	CreatedAt     time.Time `json:"created_at"`
}

// Wallet is the answer of GET /v1/wallets/{user_id}: the selected currency's
// balance and entries, and every currency's balance.
type Wallet struct {
	UserID   string `json:"user_id"`
	Currency string `json:"currency"`
	Balance  int64  `json:"balance"`
	// Owed is what the wallet owes the platform (a refund or lost dispute
	// it could not cover, docs/reference/accounting.md); payouts wait until it is 0.
	Owed    int64     `json:"owed"`
	Entries []Entry   `json:"entries"`
	Wallets []Balance `json:"wallets"`
}

// Store reads wallets.
type Store struct{ pool *pgxpool.Pool }

// NewStore returns a Store on pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Get returns userID's wallet in currency ("" picks the most recently active
// one) with its latest limit entries.
func (s *Store) Get(ctx context.Context, userID, currency string, limit int) (Wallet, error) {
	rows, err := s.pool.Query(ctx, sqlBalances, userID)
	if err != nil {
		return Wallet{}, fmt.Errorf("load wallets: %w", err)
	}
	type row struct {
		id int64
		Balance
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var w row
		err := r.Scan(&w.id, &w.Currency, &w.Balance.Balance, &w.Owed, &w.UpdatedAt)
		return w, err
	})
	if err != nil {
		return Wallet{}, fmt.Errorf("load wallets: %w", err)
	}
	if len(all) == 0 {
		return Wallet{}, ErrNotFound
	}
	chosen := -1
	for i, w := range all {
		if currency == "" || w.Currency == currency {
			chosen = i
			break
		}
	}
	if chosen < 0 {
		return Wallet{}, ErrNotFound
	}
	out := Wallet{UserID: userID, Currency: all[chosen].Currency, Balance: all[chosen].Balance.Balance, Owed: all[chosen].Owed}
	for _, w := range all {
		out.Wallets = append(out.Wallets, w.Balance)
	}
	erows, err := s.pool.Query(ctx, sqlEntries, all[chosen].id, limit)
	if err != nil {
		return Wallet{}, fmt.Errorf("load ledger entries: %w", err)
	}
	out.Entries, err = pgx.CollectRows(erows, func(r pgx.CollectableRow) (Entry, error) {
		var e Entry
		err := r.Scan(&e.TransactionID, &e.Kind, &e.Reference, &e.Amount, &e.Currency, &e.CreatedAt)
		return e, err
	})
	if err != nil {
		return Wallet{}, fmt.Errorf("load ledger entries: %w", err)
	}
	return out, nil
}
