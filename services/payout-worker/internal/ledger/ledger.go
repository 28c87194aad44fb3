package ledger

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/logging"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger/sqlcdb"
)

// Errors callers decide on.
var (
	// ErrInsufficientFunds means the wallet cannot cover a debit.
	ErrInsufficientFunds = errors.New("insufficient funds")
	// ErrAlreadyPosted means a transaction with this kind and reference exists:
	// the effect already happened, nothing was changed.
	ErrAlreadyPosted = errors.New("ledger transaction already posted")
)

// Kinds of ledger transactions.
const (
	KindCredit        = "credit"
	KindPayoutHold    = "payout_hold"
	KindPayoutSettle  = "payout_settle"
	KindPayoutRelease = "payout_release"
	KindPayoutReturn  = "payout_return"
	// KindPSPFee: what the PSP kept of a credited payment, from the
	// clearing account to the PSP's fees account (reference as the credit's).
	KindPSPFee = "psp_fee"
)

type accountKey struct{ kind, owner, currency string }

// Ledger posts transactions. Its only state is a cache of system account
// ids, which never change once created.
type Ledger struct {
	pool *pgxpool.Pool
	mu   sync.Mutex
	ids  map[accountKey]int64
	// settlementDelay: credits are available for payouts this long after
	// they are posted (availability.go); set once before use.
	settlementDelay time.Duration
}

// New returns a Ledger on pool (used only to create system accounts).
func New(pool *pgxpool.Pool) *Ledger { return &Ledger{pool: pool, ids: map[accountKey]int64{}} }

func clearing(provider string) string { return "psp_clearing:" + provider }

// fees is the account of what a PSP kept of payments: negative, the
// platform's cost.
func fees(provider string) string { return "psp_fees:" + provider }

const holds = "payout_holds"

// leg is one entry: the account and its signed amount.
type leg struct {
	account accountKey
	amount  int64
}

// post writes one balanced transaction. A posting locks at most one row (its
// user wallet), so concurrent postings cannot deadlock on wallets.
//
// A posting that debits a user wallet can be refused (ErrInsufficientFunds)
// after its transaction row is written, while the caller's transaction goes
// on (a payout refused for funds still records its FAILED state). Such a
// posting runs inside a savepoint, so a refusal leaves nothing behind — no
// transaction without entries. Postings that cannot be refused skip the
// savepoint's round trips.
func (l *Ledger) post(ctx context.Context, tx pgx.Tx, kind, reference, currency string, legs ...leg) (err error) {
	for _, lg := range legs {
		if lg.account.kind == "user" && lg.amount < 0 {
			sp, err := tx.Begin(ctx) // a savepoint
			if err != nil {
				return fmt.Errorf("savepoint for %s/%s: %w", kind, reference, err)
			}
			if err := l.write(ctx, sp, kind, reference, currency, legs); err != nil {
				_ = sp.Rollback(ctx) // back to the savepoint; the caller's transaction lives on
				return err
			}
			return sp.Commit(ctx) // releases the savepoint
		}
	}
	if err := l.write(ctx, tx, kind, reference, currency, legs); err != nil {
		return err
	}
	// Money into a wallet repays first what the wallet owes (returns.go).
	for _, lg := range legs {
		if lg.account.kind == "user" && lg.amount > 0 {
			return repay(ctx, tx, kind+":"+reference, lg.account.owner, currency)
		}
	}
	return nil
}

func (l *Ledger) write(ctx context.Context, tx pgx.Tx, kind, reference, currency string, legs []leg) error {
	q := sqlcdb.New(tx)
	txID, err := q.InsertTransaction(ctx, sqlcdb.InsertTransactionParams{Kind: kind, Reference: reference,
		CorrelationID: logging.CorrelationID(ctx)})
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrAlreadyPosted
	}
	if err != nil {
		return fmt.Errorf("insert ledger transaction %s/%s: %w", kind, reference, err)
	}
	for _, lg := range legs {
		id, err := l.walletID(ctx, tx, lg.account)
		if err != nil {
			return err
		}
		if lg.account.kind == "user" {
			if lg.amount < 0 {
				_, err := q.DebitUser(ctx, sqlcdb.DebitUserParams{Amount: -lg.amount, ID: id})
				if errors.Is(err, pgx.ErrNoRows) {
					return ErrInsufficientFunds
				}
				if err != nil {
					return fmt.Errorf("debit wallet %d: %w", id, err)
				}
			} else if err := q.CreditUser(ctx, sqlcdb.CreditUserParams{Amount: lg.amount, ID: id}); err != nil {
				return fmt.Errorf("credit wallet %d: %w", id, err)
			}
		}
		if err := q.InsertEntry(ctx, sqlcdb.InsertEntryParams{TransactionID: txID, WalletID: id, Amount: lg.amount,
			Currency: currency}); err != nil {
			return fmt.Errorf("insert ledger entry: %w", err)
		}
	}
	return nil
}

// walletID returns the account's id, creating the account if need be inside
// the caller's transaction. Only ids of committed system accounts are ever
// cached (see systemWallet): an id cached from inside a transaction would
// hand other postings a wallet they cannot see yet, or one that never
// existed if that transaction rolled back. And a posting never takes a
// second connection to create one: with every pooled connection held by a
// posting waiting for another, the worker would deadlock.
func (l *Ledger) walletID(ctx context.Context, tx pgx.Tx, k accountKey) (int64, error) {
	if k.kind == "system" {
		l.mu.Lock()
		id, ok := l.ids[k]
		l.mu.Unlock()
		if ok {
			return id, nil
		}
	}
	return ensureWallet(ctx, tx, k)
}

// Prepare creates (once) and caches the system accounts that postings for
// provider in currency use, so that those postings need no extra statements.
// Call it while holding no connection, before the posting's transaction.
func (l *Ledger) Prepare(ctx context.Context, provider, currency string) error {
	for _, k := range []accountKey{system(clearing(provider), currency), system(holds, currency)} {
		if _, err := l.systemWallet(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

func ensureWallet(ctx context.Context, tx pgx.Tx, k accountKey) (int64, error) {
	q := sqlcdb.New(tx)
	if err := q.EnsureWallet(ctx, sqlcdb.EnsureWalletParams{Kind: k.kind, Owner: k.owner, Currency: k.currency}); err != nil {
		return 0, fmt.Errorf("create wallet %s/%s/%s: %w", k.kind, k.owner, k.currency, err)
	}
	id, err := q.WalletID(ctx, sqlcdb.WalletIDParams{Kind: k.kind, Owner: k.owner, Currency: k.currency})
	if err != nil {
		return 0, fmt.Errorf("look up wallet %s/%s/%s: %w", k.kind, k.owner, k.currency, err)
	}
	return id, nil
}

func user(userID, currency string) accountKey { return accountKey{"user", userID, currency} }
func system(name, currency string) accountKey { return accountKey{"system", name, currency} }

// Credit moves amount from the provider's clearing account into the user's
// wallet. reference identifies the payment (provider-qualified).
func (l *Ledger) Credit(ctx context.Context, tx pgx.Tx, p Receipt) error {
	if err := p.check(); err != nil {
		return err
	}
	ref := p.Provider + ":" + p.Reference
	if err := l.post(ctx, tx, KindCredit, ref, p.Currency,
		leg{system(clearing(p.Provider), p.Currency), -p.Amount},
		leg{user(p.UserID, p.Currency), p.Amount}); err != nil || p.Fee == 0 {
		return err
	}
	return l.post(ctx, tx, KindPSPFee, ref, p.Currency,
		leg{system(clearing(p.Provider), p.Currency), p.Fee},
		leg{system(fees(p.Provider), p.Currency), -p.Fee})
}

// Receipt is a customer's payment received at a PSP, to credit to a
// user's wallet.
type Receipt struct {
	Provider string
	// Reference is the PSP's id of the payment.
	Reference string
	UserID    string
	// Amount is what the customer paid: all of it is the user's.
	Amount int64
	// Fee is what the PSP kept of it (0 when the event does not say): the
	// platform's cost, posted from the clearing account to the PSP's fees
	// account, so the clearing account tracks what the PSP holds.
	Fee      int64
	Currency string
}

func (p Receipt) check() error {
	if p.Amount <= 0 {
		return fmt.Errorf("credit amount %d must be positive", p.Amount)
	}
	if p.Fee < 0 || p.Fee > p.Amount {
		return fmt.Errorf("credit fee %d must be between 0 and the amount %d", p.Fee, p.Amount)
	}
	return nil
}

// Fee posts what a PSP kept of a payment, read from the PSP's own record
// apart from its credit (Stripe's balance transactions): clearing +fee,
// the PSP's fees account -fee, once per reference (ErrAlreadyPosted after).
func (l *Ledger) Fee(ctx context.Context, tx pgx.Tx, provider, reference string, fee int64, currency string) error {
	if fee <= 0 {
		return fmt.Errorf("fee %d of %s must be positive", fee, reference)
	}
	return l.post(ctx, tx, KindPSPFee, provider+":"+reference, currency,
		leg{system(clearing(provider), currency), fee},
		leg{system(fees(provider), currency), -fee})
}

// Payout names the payout a posting belongs to.
type Payout struct {
	ID       string
	UserID   string
	Provider string
	Amount   int64
	Currency string
}

// Hold debits the user's wallet into the payout holds account before the PSP
// is called, in one round trip (queries.sql: Hold). ErrInsufficientFunds if the
// wallet cannot cover it, ErrNotYetAvailable if it covers it only with
// credits still inside the settlement delay; ErrAlreadyPosted if the hold
// exists. A refusal writes nothing.
//
// A wallet that owes a receivable is blocked (ErrWalletOwes): a refund or
// lost dispute it could not cover must be repaid by credits first.
func (l *Ledger) Hold(ctx context.Context, tx pgx.Tx, p Payout) error {
	holdsID, err := l.walletID(ctx, tx, system(holds, p.Currency))
	if err != nil {
		return err
	}
	h, err := sqlcdb.New(tx).Hold(ctx, sqlcdb.HoldParams{PayoutID: p.ID, UserID: p.UserID, Currency: p.Currency,
		Amount: p.Amount, CorrelationID: logging.CorrelationID(ctx), HoldsID: holdsID})
	if err != nil {
		return fmt.Errorf("hold payout %s: %w", p.ID, err)
	}
	switch {
	case h.Existed:
		return ErrAlreadyPosted
	case h.Posted:
		return nil
	}
	if err := unavailable(p, h.Balance, h.Pending); err != nil {
		return err
	}
	// While it owes, its balance is 0 (every credit repays first), so the
	// debit was refused; say why.
	if owed, oerr := Owed(ctx, tx, p.UserID, p.Currency); oerr == nil && owed > 0 {
		return fmt.Errorf("%w (%d %s)", ErrWalletOwes, owed, p.Currency)
	}
	return ErrInsufficientFunds
}

// Settle moves a paid payout's hold out to the provider's clearing account.
func (l *Ledger) Settle(ctx context.Context, tx pgx.Tx, p Payout) error {
	return l.post(ctx, tx, KindPayoutSettle, p.ID, p.Currency,
		leg{system(holds, p.Currency), -p.Amount},
		leg{system(clearing(p.Provider), p.Currency), p.Amount})
}

// Release gives a failed payout's hold back to the user (compensation).
func (l *Ledger) Release(ctx context.Context, tx pgx.Tx, p Payout) error {
	return l.post(ctx, tx, KindPayoutRelease, p.ID, p.Currency,
		leg{system(holds, p.Currency), -p.Amount},
		leg{user(p.UserID, p.Currency), p.Amount})
}

// Return credits the user back what the PSP has taken back of a paid
// payout: reversed is the total so far, all reversals together (a Stripe
// transfer's amount_reversed; the payout's amount for a whole return, as
// when the bank returned it or Paystack reversed it). Each part is given
// back once, less what earlier parts gave: a part is posted under
// "<payout id>:<reversed>", the last (reversed = the amount) under the
// payout id, so a return is never posted twice and never exceeds the
// payout. part is what this call credited (0: nothing new).
func (l *Ledger) Return(ctx context.Context, tx pgx.Tx, p Payout, reversed int64) (part int64, err error) {
	if reversed <= 0 || reversed > p.Amount {
		return 0, fmt.Errorf("return of payout %s: %d reversed of %d", p.ID, reversed, p.Amount)
	}
	before, err := sqlcdb.New(tx).PayoutReturned(ctx, p.ID)
	if err != nil {
		return 0, fmt.Errorf("sum returns of payout %s: %w", p.ID, err)
	}
	part = reversed - before
	if part <= 0 {
		return 0, nil // an earlier or equal total: given back already
	}
	reference := p.ID
	if reversed < p.Amount {
		reference = p.ID + ":" + strconv.FormatInt(reversed, 10)
	}
	err = l.post(ctx, tx, KindPayoutReturn, reference, p.Currency,
		leg{system(clearing(p.Provider), p.Currency), -part},
		leg{user(p.UserID, p.Currency), part})
	if errors.Is(err, ErrAlreadyPosted) {
		return 0, nil
	}
	return part, err
}

// Posted reports whether a transaction of kind for reference exists.
func Posted(ctx context.Context, tx pgx.Tx, kind, reference string) (bool, error) {
	ok, err := sqlcdb.New(tx).Posted(ctx, sqlcdb.PostedParams{Kind: kind, Reference: reference})
	if err != nil {
		return false, fmt.Errorf("look up ledger %s/%s: %w", kind, reference, err)
	}
	return ok, nil
}

// Balance returns the user's balance in currency (0 without a wallet); db
// is a pool, a connection or a transaction.
func Balance(ctx context.Context, db sqlcdb.DBTX, userID, currency string) (int64, error) {
	b, err := sqlcdb.New(db).Balance(ctx, sqlcdb.BalanceParams{Owner: userID, Currency: currency})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read balance: %w", err)
	}
	return b, nil
}

// Claim names the consumer message a credit belongs to.
type Claim struct {
	Group   string
	EventID string
}

// CreditOutcome says what CreditOnce did.
type CreditOutcome string

// Outcomes of CreditOnce.
const (
	// Credited: the wallet was credited.
	Credited CreditOutcome = "applied"
	// DuplicateMessage: this message was handled before (it posted the
	// credit, or another path recorded it in processed_events); nothing
	// changed.
	DuplicateMessage CreditOutcome = "duplicate"
	// AlreadyCredited: another event about the same payment credited it;
	// nothing changed, and nothing needs recording: the payment's credit
	// is what makes this message, delivered again, change nothing again.
	AlreadyCredited CreditOutcome = "already_credited"
)

// CreditOnce credits the payment once, in one round trip and one (implicit)
// transaction on pool: the payment's ledger transaction, which names the
// message, is the message's idempotency record (no processed_events row).
// See queries.sql's CreditClaim.
// CreditCommitter commits many of them in one transaction instead.
func (l *Ledger) CreditOnce(ctx context.Context, pool *pgxpool.Pool, c Claim, p Receipt) (CreditOutcome, error) {
	cr, err := l.newCredit(ctx, c, p)
	if err != nil {
		return "", err
	}
	return l.creditAlone(ctx, pool, cr)
}

// credit is one credit on its way to the database: what CreditOnce's
// statements take, and what their first one answered.
type credit struct {
	claim                       Claim
	provider, reference, userID string
	currency, correlationID     string
	amount, clearingID          int64
	// fee and feesID: what the PSP kept and its fees account (0: no fee).
	fee, feesID int64
	// What CreditClaim answered: the message recorded as handled by
	// another path, the credit posted now, the credit posted before by
	// this message.
	handled, posted int
	again           bool
}

// newCredit checks a credit and looks up its clearing account, which may
// take a connection and a transaction of its own (systemWallet): call it
// before, never inside, the credit's transaction.
func (l *Ledger) newCredit(ctx context.Context, c Claim, p Receipt) (*credit, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	clearingID, err := l.systemWallet(ctx, system(clearing(p.Provider), p.Currency))
	if err != nil {
		return nil, err
	}
	cr := &credit{claim: c, provider: p.Provider, reference: p.Reference, userID: p.UserID, currency: p.Currency,
		correlationID: logging.CorrelationID(ctx), amount: p.Amount, clearingID: clearingID, fee: p.Fee}
	if p.Fee > 0 {
		if cr.feesID, err = l.systemWallet(ctx, system(fees(p.Provider), p.Currency)); err != nil {
			return nil, err
		}
	}
	return cr, nil
}

// queue adds the credit's statements to b, under a new ledger transaction
// id (so a credit queued again, alone after its group failed, starts
// afresh). The first inserts the payment's ledger transaction, naming the
// message, unless the payment is credited or the message was recorded as
// handled elsewhere, and only when it did do the others change anything
// (each checks that its transaction row exists): so several credits in one
// transaction see each other's claims and postings as separate
// transactions would.
func (l *Ledger) queue(ctx context.Context, b *pgx.Batch, cr *credit) error {
	txID, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("new ledger transaction id: %w", err)
	}
	cr.handled, cr.posted, cr.again = 0, 0, false
	ref := cr.provider + ":" + cr.reference
	claim, err := queue(b, func(q *sqlcdb.Queries) {
		_, _ = q.CreditClaim(ctx, sqlcdb.CreditClaimParams{ConsumerGroup: cr.claim.Group, EventID: cr.claim.EventID,
			TxID: txID, Reference: ref, CorrelationID: cr.correlationID})
	})
	if err != nil {
		return err
	}
	claim.QueryRow(func(r pgx.Row) error { return r.Scan(&cr.handled, &cr.posted, &cr.again) })
	calls := []func(q *sqlcdb.Queries){
		func(q *sqlcdb.Queries) {
			_ = q.CreditWallet(ctx, sqlcdb.CreditWalletParams{UserID: cr.userID, Currency: cr.currency, Amount: cr.amount,
				TxID: txID})
		},
		func(q *sqlcdb.Queries) {
			_ = q.CreditEntries(ctx, sqlcdb.CreditEntriesParams{TxID: txID, Amount: cr.amount, Currency: cr.currency,
				UserID: cr.userID, ClearingID: cr.clearingID})
		},
		func(q *sqlcdb.Queries) {
			_ = q.Repay(ctx, sqlcdb.RepayParams{Currency: cr.currency, UserID: cr.userID, CreditTx: &txID,
				Reference: KindCredit + ":" + ref, CorrelationID: cr.correlationID})
		},
	}
	if cr.fee > 0 {
		feeTx, err := uuid.NewV7()
		if err != nil {
			return fmt.Errorf("new ledger transaction id: %w", err)
		}
		calls = append(calls, func(q *sqlcdb.Queries) {
			_ = q.CreditFee(ctx, sqlcdb.CreditFeeParams{CreditTx: txID, FeeTx: feeTx, Reference: ref, CorrelationID: cr.correlationID,
				Fee: cr.fee, Currency: cr.currency, ClearingID: cr.clearingID, FeesID: cr.feesID})
		})
	}
	if l.settlementDelay > 0 {
		calls = append(calls, func(q *sqlcdb.Queries) {
			_ = q.CreditAvailability(ctx, sqlcdb.CreditAvailabilityParams{UserID: cr.userID, Currency: cr.currency,
				Amount: cr.amount, DelayUs: l.settlementDelay.Microseconds(), TxID: txID})
		})
	}
	for _, call := range calls {
		if _, err := queue(b, call); err != nil {
			return err
		}
	}
	return nil
}

// queue adds to b the statement call sends through sqlcdb (database.Queue).
func queue(b *pgx.Batch, call func(q *sqlcdb.Queries)) (*pgx.QueuedQuery, error) {
	return database.Queue(b, func(r *database.Recorder) { call(sqlcdb.New(r)) })
}

// creditAlone sends one credit as one batch in one implicit transaction.
// The Postgres error stays in the chain (%w): the consumer classifies it.
func (l *Ledger) creditAlone(ctx context.Context, pool *pgxpool.Pool, cr *credit) (CreditOutcome, error) {
	b := &pgx.Batch{}
	if err := l.queue(ctx, b, cr); err != nil {
		return "", err
	}
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		return "", fmt.Errorf("credit %s:%s: %w", cr.provider, cr.reference, err)
	}
	return cr.outcome(), nil
}

// outcome is what the credit's committed statements did.
func (cr *credit) outcome() CreditOutcome {
	switch {
	case cr.posted > 0:
		return Credited
	case cr.handled > 0 || cr.again:
		return DuplicateMessage
	}
	return AlreadyCredited
}

// systemWallet returns a system account's id, creating it on first use in
// its own committed transaction; only a committed id is cached. It takes a
// connection of its own: never call it inside a transaction.
func (l *Ledger) systemWallet(ctx context.Context, k accountKey) (int64, error) {
	l.mu.Lock()
	id, ok := l.ids[k]
	l.mu.Unlock()
	if ok {
		return id, nil
	}
	err := pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		var err error
		id, err = ensureWallet(ctx, tx, k)
		return err
	})
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	l.ids[k] = id
	l.mu.Unlock()
	return id, nil
}
