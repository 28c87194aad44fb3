package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/logging"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger/sqlcdb"
)

// Kinds of ledger transactions for money that goes back (docs/reference/accounting.md).
const (
	KindRefund          = "refund"
	KindRefundReversal  = "refund_reversal"
	KindDisputeHold     = "dispute_hold"
	KindDisputeRelease  = "dispute_release"
	KindDisputeLoss     = "dispute_loss"
	KindReceivableRepay = "receivable_repay"
)

// Kinds of payment_returns objects.
const (
	ReturnRefund  = "refund"
	ReturnDispute = "dispute"
)

// System accounts per currency for money that goes back.
const (
	disputesAccount    = "disputes"
	receivablesAccount = "receivables"
)

// Errors that make a refund or dispute event evidence we cannot act on: no
// money moves, the event is dead-lettered for a person.
var (
	// ErrNotCredited: the payment the event names was never credited here.
	ErrNotCredited = errors.New("payment was never credited")
	// ErrExceedsRefundable: the amount is more than what is left of the payment.
	ErrExceedsRefundable = errors.New("amount exceeds what is left of the payment")
	// ErrReturnMismatch: the event contradicts the payment (currency).
	ErrReturnMismatch = errors.New("refund or dispute does not match its payment")
	// ErrWalletOwes: the wallet owes the platform (a receivable) and cannot
	// pay out until a credit repays it. It is an ErrInsufficientFunds.
	ErrWalletOwes = fmt.Errorf("%w: the wallet owes a receivable", ErrInsufficientFunds)
)

// PrepareReturns creates (once) the system accounts that refunds and
// disputes in currency use. Call it holding no connection.
func (l *Ledger) PrepareReturns(ctx context.Context, provider, currency string) error {
	for _, k := range []accountKey{system(clearing(provider), currency), system(disputesAccount, currency),
		system(receivablesAccount, currency)} {
		if _, err := l.systemWallet(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// Payment is a credited payment as the ledger recorded it.
type Payment struct {
	Reference string // provider-qualified, as ledger_transactions.reference
	UserID    string
	Amount    int64
	Currency  string
}

// ReturnResult says what ApplyReturn changed.
type ReturnResult struct {
	// Posted lists the kinds of the transactions posted (empty: nothing
	// changed, the event was a duplicate or stale).
	Posted []string
	// Owed is the shortfall this call added to the user's receivable.
	Owed    int64
	Payment Payment
	// State is the object's state after the call.
	State string
	// Amount is what each posting moved: the object's amount as first
	// recorded.
	Amount int64
}

// ApplyReturn brings the ledger to what the event says of one refund or
// dispute object of the payment paymentRef (provider-unqualified) and
// records the object's state, in the caller's transaction. It posts only the
// difference between the object's recorded state and the event's outcome, so
// events delivered twice, late or out of order end in the same ledger. It
// serialises on the user's wallet row: all objects of a payment (and all
// debits of the wallet) take their turns.
func (l *Ledger) ApplyReturn(ctx context.Context, tx pgx.Tx, provider, kind, paymentRef, eventID string, r event.Return) (ReturnResult, error) {
	var res ReturnResult
	p, err := creditedPayment(ctx, tx, provider+":"+paymentRef)
	if err != nil {
		return res, err
	}
	res.Payment = p
	if r.Currency != p.Currency {
		return res, fmt.Errorf("%w: %s %s is in %s, payment %s in %s", ErrReturnMismatch, kind, r.ID, r.Currency, p.Reference, p.Currency)
	}
	q := sqlcdb.New(tx)
	if err := q.LockUser(ctx, sqlcdb.LockUserParams{Owner: p.UserID, Currency: p.Currency}); err != nil {
		return res, fmt.Errorf("lock wallet of %s: %w", p.UserID, err)
	}
	recorded, err := q.ReturnState(ctx, sqlcdb.ReturnStateParams{Provider: provider, Kind: kind, ObjectID: r.ID})
	state, amount := recorded.State, recorded.Amount
	fresh := errors.Is(err, pgx.ErrNoRows)
	if err != nil && !fresh {
		return res, fmt.Errorf("read %s %s: %w", kind, r.ID, err)
	}
	if fresh {
		amount = r.Amount
		left, err := q.Refundable(ctx, sqlcdb.RefundableParams{PaymentAmount: p.Amount, PaymentReference: p.Reference})
		if err != nil {
			return res, fmt.Errorf("refundable left of %s: %w", p.Reference, err)
		}
		voidRefund := kind == ReturnRefund && r.Outcome == event.OutcomeRefundVoid
		if amount > left && !voidRefund {
			return res, fmt.Errorf("%w: %s %s of %d %s, payment %s has %d left of %d", ErrExceedsRefundable,
				kind, r.ID, amount, p.Currency, p.Reference, left, p.Amount)
		}
	}
	ref := provider + ":" + r.ID
	// steps are the postings from the recorded state to the event's outcome.
	var steps []func() (int64, error)
	next := state
	debit := func(kind string, to accountKey) func() (int64, error) {
		return func() (int64, error) { return l.debitOrOwe(ctx, tx, kind, ref, p.UserID, p.Currency, amount, to) }
	}
	credit := func(kind string, from accountKey) func() (int64, error) {
		return func() (int64, error) {
			return 0, l.creditRepaying(ctx, tx, kind, ref, p.UserID, p.Currency, amount, from)
		}
	}
	clearingAcc, disputesAcc := system(clearing(provider), p.Currency), system(disputesAccount, p.Currency)
	switch kind {
	case ReturnRefund:
		switch {
		case fresh && r.Outcome == event.OutcomeRefunded:
			steps, next = append(steps, debit(KindRefund, clearingAcc)), event.OutcomeRefunded
		case fresh && r.Outcome == event.OutcomeRefundVoid:
			next = event.OutcomeRefundVoid // recorded, so a late "created" moves nothing
		case state == event.OutcomeRefunded && r.Outcome == event.OutcomeRefundVoid:
			steps, next = append(steps, credit(KindRefundReversal, clearingAcc)), event.OutcomeRefundVoid
		}
	case ReturnDispute:
		if fresh {
			steps, next = append(steps, debit(KindDisputeHold, disputesAcc)), event.OutcomeDisputeOpen
		}
		if next == event.OutcomeDisputeOpen {
			switch r.Outcome {
			case event.OutcomeDisputeWon:
				steps, next = append(steps, credit(KindDisputeRelease, disputesAcc)), event.OutcomeDisputeWon
			case event.OutcomeDisputeLost:
				steps = append(steps, func() (int64, error) {
					return 0, l.post(ctx, tx, KindDisputeLoss, ref, p.Currency,
						leg{disputesAcc, -amount}, leg{clearingAcc, amount})
				})
				next = event.OutcomeDisputeLost
			}
		}
	default:
		return res, fmt.Errorf("unknown return kind %q", kind)
	}
	res.State, res.Amount = next, amount
	if fresh && next == "" {
		return res, fmt.Errorf("%w: %s %s has no outcome", ErrReturnMismatch, kind, r.ID)
	}
	if !fresh && next == state {
		return res, nil // a duplicate, or stale: the object is already there or further
	}
	for _, step := range steps {
		owed, err := step()
		if err != nil {
			return res, err
		}
		res.Owed += owed
	}
	res.Posted = postedKinds(kind, state, next, fresh)
	if err := q.UpsertReturn(ctx, sqlcdb.UpsertReturnParams{Provider: provider, ObjectID: r.ID, Kind: kind,
		PaymentReference: p.Reference, UserID: p.UserID, Currency: p.Currency, Amount: amount, State: next,
		LastEventID: eventID}); err != nil {
		return res, fmt.Errorf("record %s %s: %w", kind, r.ID, err)
	}
	return res, nil
}

// postedKinds names the transactions a transition posted, for the caller's
// logs and metrics.
func postedKinds(kind, from, to string, fresh bool) []string {
	var out []string
	switch kind {
	case ReturnRefund:
		if fresh && to == event.OutcomeRefunded {
			out = append(out, KindRefund)
		}
		if from == event.OutcomeRefunded && to == event.OutcomeRefundVoid {
			out = append(out, KindRefundReversal)
		}
	case ReturnDispute:
		if fresh {
			out = append(out, KindDisputeHold)
		}
		switch to {
		case event.OutcomeDisputeWon:
			out = append(out, KindDisputeRelease)
		case event.OutcomeDisputeLost:
			out = append(out, KindDisputeLoss)
		}
	}
	return out
}

func creditedPayment(ctx context.Context, tx pgx.Tx, reference string) (Payment, error) {
	row, err := sqlcdb.New(tx).CreditedPayment(ctx, reference)
	p := Payment{Reference: reference, UserID: row.Owner, Amount: row.Amount, Currency: row.Currency}
	if errors.Is(err, pgx.ErrNoRows) {
		return p, fmt.Errorf("%w: %s", ErrNotCredited, reference)
	}
	if err != nil {
		return p, fmt.Errorf("look up credit %s: %w", reference, err)
	}
	return p, nil
}

// debitOrOwe posts amount from the user's wallet to account to. What the
// wallet cannot cover is not refused (the money has already left at the
// PSP): it is taken from the receivables account and added to the wallet's
// owed, so the balance never goes negative. It returns that shortfall. The
// caller holds the wallet's row lock.
func (l *Ledger) debitOrOwe(ctx context.Context, tx pgx.Tx, kind, reference, userID, currency string, amount int64, to accountKey) (int64, error) {
	txID, err := l.newTransaction(ctx, tx, kind, reference)
	if err != nil {
		return 0, err
	}
	d, err := sqlcdb.New(tx).DebitOrOwe(ctx, sqlcdb.DebitOrOweParams{Amount: amount, Owner: userID, Currency: currency})
	if err != nil {
		return 0, fmt.Errorf("debit wallet of %s: %w", userID, err)
	}
	take := d.Take
	short := amount - take
	legs := []leg{{to, amount}}
	if take > 0 {
		legs = append(legs, leg{user(userID, currency), -take})
	}
	if short > 0 {
		legs = append(legs, leg{system(receivablesAccount, currency), -short})
	}
	return short, l.entries(ctx, tx, txID, currency, legs)
}

// creditRepaying posts amount from account from into the user's wallet;
// post repays what the wallet owes from it.
func (l *Ledger) creditRepaying(ctx context.Context, tx pgx.Tx, kind, reference, userID, currency string, amount int64, from accountKey) error {
	return l.post(ctx, tx, kind, reference, currency, leg{from, -amount}, leg{user(userID, currency), amount})
}

// repay moves what the user's wallet owes, as far as its balance covers it,
// to the receivables account, as one receivable_repay transaction named
// after the credit that brought the money (reference). Nothing when the
// wallet owes nothing.
func repay(ctx context.Context, tx pgx.Tx, reference, userID, currency string) error {
	if err := sqlcdb.New(tx).Repay(ctx, sqlcdb.RepayParams{Currency: currency, UserID: userID, Reference: reference,
		CorrelationID: logging.CorrelationID(ctx)}); err != nil {
		return fmt.Errorf("repay receivable of %s: %w", userID, err)
	}
	return nil
}

func (l *Ledger) newTransaction(ctx context.Context, tx pgx.Tx, kind, reference string) (uuid.UUID, error) {
	txID, err := sqlcdb.New(tx).InsertTransaction(ctx, sqlcdb.InsertTransactionParams{Kind: kind, Reference: reference,
		CorrelationID: logging.CorrelationID(ctx)})
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, ErrAlreadyPosted
	}
	if err != nil {
		return uuid.Nil, fmt.Errorf("insert ledger transaction %s/%s: %w", kind, reference, err)
	}
	return txID, nil
}

// entries writes legs whose user balances are already updated.
func (l *Ledger) entries(ctx context.Context, tx pgx.Tx, txID uuid.UUID, currency string, legs []leg) error {
	q := sqlcdb.New(tx)
	for _, lg := range legs {
		id, err := l.walletID(ctx, tx, lg.account)
		if err != nil {
			return err
		}
		if err := q.InsertEntry(ctx, sqlcdb.InsertEntryParams{TransactionID: txID, WalletID: id, Amount: lg.amount,
			Currency: currency}); err != nil {
			return fmt.Errorf("insert ledger entry: %w", err)
		}
	}
	return nil
}

// Owed returns what the user's wallet owes in currency (0 without a wallet).
func Owed(ctx context.Context, db sqlcdb.DBTX, userID, currency string) (int64, error) {
	o, err := sqlcdb.New(db).Owed(ctx, sqlcdb.OwedParams{Owner: userID, Currency: currency})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read owed: %w", err)
	}
	return o, nil
}
