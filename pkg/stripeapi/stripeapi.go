package stripeapi

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/account"
	"github.com/stripe/stripe-go/v76/balance"
	"github.com/stripe/stripe-go/v76/balancetransaction"
	"github.com/stripe/stripe-go/v76/bankaccount"
	"github.com/stripe/stripe-go/v76/card"
	"github.com/stripe/stripe-go/v76/form"
	"github.com/stripe/stripe-go/v76/payout"
	"github.com/stripe/stripe-go/v76/transfer"
)

// Client sends Aegis's requests to Stripe.
type Client struct {
	b            stripe.Backend
	key          string
	payouts      payout.Client
	transfers    transfer.Client
	accounts     account.Client
	bankAccounts bankaccount.Client
	cards        card.Client
	balanceTxns  balancetransaction.Client
	balance      balance.Client
}

// New returns a client for secretKey. apiBase overrides Stripe's URL
// (STRIPE_API_BASE: the stand-in in dev and tests, stripe-mock in the
// contract test); "" is Stripe's own.
func New(secretKey, apiBase string, httpClient *http.Client) *Client {
	cfg := &stripe.BackendConfig{
		HTTPClient:        httpClient,
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if apiBase != "" {
		cfg.URL = stripe.String(strings.TrimRight(apiBase, "/"))
	}
	b := stripe.GetBackendWithConfig(stripe.APIBackend, cfg)
	return &Client{b: b, key: secretKey, payouts: payout.Client{B: b, Key: secretKey},
		transfers: transfer.Client{B: b, Key: secretKey}, accounts: account.Client{B: b, Key: secretKey},
		bankAccounts: bankaccount.Client{B: b, Key: secretKey}, cards: card.Client{B: b, Key: secretKey},
		balanceTxns: balancetransaction.Client{B: b, Key: secretKey}, balance: balance.Client{B: b, Key: secretKey}}
}

// IsNotFound reports whether Stripe answered 404: the object does not exist
// (for the key and account the request named).
func IsNotFound(err error) bool {
	var se *stripe.Error
	return errors.As(err, &se) && se.HTTPStatusCode == http.StatusNotFound
}

// Money is an amount in a currency's minor unit.
type Money struct {
	Amount   int64
	Currency string
}

// TransferRequest is a transfer from the platform's balance to a connected
// account (POST /v1/transfers).
type TransferRequest struct {
	Money
	// Destination is the connected account (acct_…).
	Destination string
	// TransferGroup groups the transfer with the payout it pays.
	TransferGroup  string
	Metadata       map[string]string
	IdempotencyKey string
}

// CreateTransfer creates a transfer under the request's Idempotency-Key.
func (c *Client) CreateTransfer(ctx context.Context, r TransferRequest) (*stripe.Transfer, error) {
	return c.transfers.New(transferParams(ctx, r))
}

func transferParams(ctx context.Context, r TransferRequest) *stripe.TransferParams {
	params := &stripe.TransferParams{
		Amount: stripe.Int64(r.Amount), Currency: stripe.String(r.Currency),
		Destination: stripe.String(r.Destination),
	}
	if r.TransferGroup != "" {
		params.TransferGroup = stripe.String(r.TransferGroup)
	}
	params.Context = ctx
	params.Metadata = r.Metadata
	params.SetIdempotencyKey(r.IdempotencyKey)
	return params
}

// Transfer reads one transfer (GET /v1/transfers/{id}).
func (c *Client) Transfer(ctx context.Context, id string) (*stripe.Transfer, error) {
	params := &stripe.TransferParams{}
	params.Context = ctx
	return c.transfers.Get(id, params)
}

// TransferQuery filters a transfer listing; zero fields do not filter.
type TransferQuery struct {
	Since         time.Time
	TransferGroup string
	Destination   string
}

// Transfers lists transfers newest first (GET /v1/transfers).
func (c *Client) Transfers(ctx context.Context, q TransferQuery) iter.Seq2[*stripe.Transfer, error] {
	params := &stripe.TransferListParams{}
	if !q.Since.IsZero() {
		params.CreatedRange = &stripe.RangeQueryParams{GreaterThanOrEqual: q.Since.Unix()}
	}
	if q.TransferGroup != "" {
		params.TransferGroup = stripe.String(q.TransferGroup)
	}
	if q.Destination != "" {
		params.Destination = stripe.String(q.Destination)
	}
	params.Context = ctx
	params.Limit = stripe.Int64(100)
	return each(func() lister[*stripe.Transfer] {
		it := c.transfers.List(params)
		return lister[*stripe.Transfer]{it.Next, it.Transfer, it.Err}
	})
}

// PayoutRequest is a payout from an account's balance to one of its own
// external accounts (POST /v1/payouts).
type PayoutRequest struct {
	Money
	// Account is the connected account whose balance pays (the
	// Stripe-Account header); "" is the platform's own.
	Account string
	// Destination is the account's external account (ba_…, card_…); ""
	// is its default for the currency.
	Destination    string
	Metadata       map[string]string
	IdempotencyKey string
}

// CreatePayout creates a payout under the request's Idempotency-Key.
func (c *Client) CreatePayout(ctx context.Context, r PayoutRequest) (*stripe.Payout, error) {
	params := &stripe.PayoutParams{Amount: stripe.Int64(r.Amount), Currency: stripe.String(r.Currency)}
	if r.Destination != "" {
		params.Destination = stripe.String(r.Destination)
	}
	params.Context = ctx
	params.Metadata = r.Metadata
	params.SetIdempotencyKey(r.IdempotencyKey)
	if r.Account != "" {
		params.SetStripeAccount(r.Account)
	}
	return c.payouts.New(params)
}

// Payout reads one payout of account ("" the platform's).
func (c *Client) Payout(ctx context.Context, account, id string) (*stripe.Payout, error) {
	params := &stripe.PayoutParams{}
	params.Context = ctx
	if account != "" {
		params.SetStripeAccount(account)
	}
	return c.payouts.Get(id, params)
}

// PayoutQuery filters a payout listing; zero fields do not filter.
type PayoutQuery struct {
	// Account is the connected account whose payouts are listed; "" the
	// platform's.
	Account     string
	Since       time.Time
	Destination string
}

// Payouts lists payouts newest first (GET /v1/payouts).
func (c *Client) Payouts(ctx context.Context, q PayoutQuery) iter.Seq2[*stripe.Payout, error] {
	params := &stripe.PayoutListParams{}
	if !q.Since.IsZero() {
		params.CreatedRange = &stripe.RangeQueryParams{GreaterThanOrEqual: q.Since.Unix()}
	}
	if q.Destination != "" {
		params.Destination = stripe.String(q.Destination)
	}
	params.Context = ctx
	params.Limit = stripe.Int64(100)
	if q.Account != "" {
		params.SetStripeAccount(q.Account)
	}
	return each(func() lister[*stripe.Payout] {
		it := c.payouts.List(params)
		return lister[*stripe.Payout]{it.Next, it.Payout, it.Err}
	})
}

// Account reads a connected account (GET /v1/accounts/{id}).
func (c *Client) Account(ctx context.Context, id string) (*stripe.Account, error) {
	params := &stripe.AccountParams{}
	params.Context = ctx
	return c.accounts.GetByID(id, params)
}

// ExternalAccount is a connected account's bank account (ba_…) or debit
// card (card_…), the two kinds of external account Stripe pays out to.
type ExternalAccount struct {
	ID string
	// Object is "bank_account" or "card".
	Object   string
	Account  string
	Currency string
	Country  string
	// Status is a bank account's (new, validated, verified,
	// verification_failed, errored); "" for a card.
	Status string
}

// ExternalAccount reads one external account of a connected account
// (GET /v1/accounts/{account}/external_accounts/{id}); a 404 means it does
// not exist or is not that account's.
func (c *Client) ExternalAccount(ctx context.Context, account, id string) (ExternalAccount, error) {
	if strings.HasPrefix(id, "card_") {
		params := &stripe.CardParams{Account: stripe.String(account)}
		params.Context = ctx
		cd, err := c.cards.Get(id, params)
		if err != nil {
			return ExternalAccount{}, err
		}
		return ExternalAccount{ID: cd.ID, Object: "card", Account: accountID(cd.Account), Currency: string(cd.Currency),
			Country: cd.Country}, nil
	}
	params := &stripe.BankAccountParams{Account: stripe.String(account)}
	params.Context = ctx
	ba, err := c.bankAccounts.Get(id, params)
	if err != nil {
		return ExternalAccount{}, err
	}
	return ExternalAccount{ID: ba.ID, Object: "bank_account", Account: accountID(ba.Account),
		Currency: string(ba.Currency), Country: ba.Country, Status: string(ba.Status)}, nil
}

func accountID(a *stripe.Account) string {
	if a == nil {
		return ""
	}
	return a.ID
}

// BalanceTransactions lists the platform's balance transactions created in
// [since, until), newest first (GET /v1/balance_transactions), each with
// its source expanded (a charge's metadata says whose payment it was).
func (c *Client) BalanceTransactions(ctx context.Context, since, until time.Time) iter.Seq2[*stripe.BalanceTransaction, error] {
	params := &stripe.BalanceTransactionListParams{
		CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: since.Unix(), LesserThan: until.Unix()}}
	params.AddExpand("data.source")
	params.Context = ctx
	params.Limit = stripe.Int64(100)
	return each(func() lister[*stripe.BalanceTransaction] {
		it := c.balanceTxns.List(params)
		return lister[*stripe.BalanceTransaction]{it.Next, it.BalanceTransaction, it.Err}
	})
}

// Balance reads account's balance now (GET /v1/balance; "" the platform's,
// acct_… with its Stripe-Account header): per currency, what is available
// and what is pending (not yet available: a payment's funds before they
// settle), in minor units.
func (c *Client) Balance(ctx context.Context, account string) (*stripe.Balance, error) {
	params := &stripe.BalanceParams{}
	params.Context = ctx
	if account != "" {
		params.SetStripeAccount(account)
	}
	return c.balance.Get(params)
}

// RawEvent is one event as Stripe rendered it, kept byte for byte: it is
// stored and normalised exactly as its webhook would have been.
type RawEvent struct {
	// ID is what the listing pages on (starting_after).
	ID   string
	Body []byte
}

// UnmarshalJSON keeps the event's bytes and reads its id.
func (e *RawEvent) UnmarshalJSON(b []byte) error {
	var v struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	e.ID, e.Body = v.ID, append([]byte(nil), b...)
	return nil
}

type rawEventList struct {
	stripe.APIResource
	stripe.ListMeta
	Data []*RawEvent `json:"data"`
}

func (l *rawEventList) GetListMeta() *stripe.ListMeta { return &l.ListMeta }

// Events lists account's events created since since, newest first
// (GET /v1/events?created[gte]=since), each as Stripe rendered it. account
// "" is the platform's own; a connected account's (acct_…) are listed with
// its Stripe-Account header: the platform's listing does not show them,
// and each carries the account at its top level ("account").
func (c *Client) Events(ctx context.Context, account string, since time.Time) iter.Seq2[*RawEvent, error] {
	params := &stripe.EventListParams{CreatedRange: &stripe.RangeQueryParams{GreaterThanOrEqual: since.Unix()}}
	params.Context = ctx
	params.Limit = stripe.Int64(100)
	if account != "" {
		params.SetStripeAccount(account)
	}
	return each(func() lister[*RawEvent] {
		it := stripe.GetIter(params, func(p *stripe.Params, b *form.Values) ([]interface{}, stripe.ListContainer, error) {
			list := &rawEventList{}
			err := c.b.CallRaw(http.MethodGet, "/v1/events", c.key, b, p, list)
			out := make([]interface{}, len(list.Data))
			for i, e := range list.Data {
				out[i] = e
			}
			return out, list, err
		})
		return lister[*RawEvent]{it.Next, func() *RawEvent { return it.Current().(*RawEvent) }, it.Err}
	})
}

// lister is a stripe-go list iterator's three methods.
type lister[T any] struct {
	next    func() bool
	current func() T
	err     func() error
}

// each adapts a stripe-go list to a Go iterator: every item with a nil
// error, then (if paging failed) a zero item with the error. The listing
// starts (its first page is requested) only when the iterator is ranged.
func each[T any](start func() lister[T]) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		l := start()
		for l.next() {
			if !yield(l.current(), nil) {
				return
			}
		}
		if err := l.err(); err != nil {
			var zero T
			yield(zero, err)
		}
	}
}
