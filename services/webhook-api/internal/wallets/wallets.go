package wallets

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/services/webhook-api/internal/wallets/sqlcdb"
)

// ErrNotFound means the user has no wallet (in that currency).
var ErrNotFound = errors.New("wallet not found")

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
	q := sqlcdb.New(s.pool)
	all, err := q.Balances(ctx, userID)
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
	out := Wallet{UserID: userID, Currency: all[chosen].Currency, Balance: all[chosen].Balance, Owed: all[chosen].Owed}
	for _, w := range all {
		out.Wallets = append(out.Wallets, Balance{Currency: w.Currency, Balance: w.Balance, Owed: w.Owed, UpdatedAt: w.UpdatedAt})
	}
	entries, err := q.Entries(ctx, sqlcdb.EntriesParams{WalletID: all[chosen].ID, MaxEntries: limit})
	if err != nil {
		return Wallet{}, fmt.Errorf("load ledger entries: %w", err)
	}
	out.Entries = make([]Entry, 0, len(entries))
	for _, e := range entries {
		out.Entries = append(out.Entries, Entry(e))
	}
	return out, nil
}
