package pspsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v76"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/paystackapi"
	"github.com/aegis-payments/aegis/pkg/provider"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
)

// Pulled is one event from a PSP's own record, as the PSP renders it.
type Pulled struct {
	Body []byte
}

// Object kinds and the PSP's verdict on one.
const (
	KindPayout   = "payout"
	KindTransfer = "transfer"

	// PSPPaid: the money left (a paid payout, a transfer not reversed).
	PSPPaid = "paid"
	// PSPFailed: it did not (failed, canceled, reversed).
	PSPFailed = "failed"
	// PSPPending: not decided yet.
	PSPPending = "pending"
)

// Object is one payout or transfer at the PSP.
type Object struct {
	Kind string
	ID   string
	// PayoutID is our payout id (Stripe metadata[payout_id], Paystack reference).
	PayoutID string
	// Status is the PSP's own status; Verdict is PSPPaid, PSPFailed or PSPPending.
	Status   string
	Verdict  string
	Amount   int64
	Currency string
	// Destination is where it pays: the bank account or card (Stripe
	// payout), connected account (Stripe transfer) or transfer recipient
	// code (Paystack); "" when the PSP's record does not say.
	Destination string
	// Account is the connected account a Stripe payout was made on (its
	// Stripe-Account); "" the platform's own.
	Account string
}

// ErrNotFound means the PSP does not know the object.
var ErrNotFound = errors.New("not found at the PSP")

// Source is one PSP's record: its events and its payout-side objects.
type Source interface {
	Provider() string
	// Events lists every event the PSP created since since (for Paystack,
	// which has no events API, the events its objects' states stand for).
	Events(ctx context.Context, since time.Time) ([]Pulled, error)
	// Objects lists the payouts and transfers created since since.
	Objects(ctx context.Context, since time.Time) ([]Object, error)
	// Lookup reads one object: by its PSP id (Stripe) or by our payout id
	// (Paystack's reference).
	Lookup(ctx context.Context, payoutID, pspID string) (Object, error)
}

// Connect is a PSP with connected accounts (Stripe Connect). A payout to a
// connected account's external account is two objects: a transfer on the
// platform (Objects lists it) and then a payout on the connected account,
// which only that account's listings show, as they alone show its events
// (the platform's GET /v1/events does not).
type Connect interface {
	// AccountEvents lists the connected account's events created since
	// since, newest first, each carrying the account.
	AccountEvents(ctx context.Context, account string, since time.Time) ([]Pulled, error)
	// AccountPayouts lists the connected account's payouts created since
	// since that carry our metadata[payout_id].
	AccountPayouts(ctx context.Context, account string, since time.Time) ([]Object, error)
	// LookupAccountPayout reads one payout of the connected account by
	// its PSP id.
	LookupAccountPayout(ctx context.Context, account, pspID string) (Object, error)
}

// maxListed bounds one listing: past it the listing fails rather than
// reporting a partial record as the whole.
const maxListed = 100_000

// Stripe reads Stripe's record through Aegis's Stripe client (pkg/stripeapi).
type Stripe struct {
	api *stripeapi.Client
}

// NewStripe returns Stripe's record as api reads it.
func NewStripe(api *stripeapi.Client) *Stripe { return &Stripe{api: api} }

// Provider is "stripe".
func (s *Stripe) Provider() string { return string(provider.Stripe) }

// Events pages the platform's GET /v1/events?created[gte]=since, newest
// first.
func (s *Stripe) Events(ctx context.Context, since time.Time) ([]Pulled, error) {
	return s.events(ctx, "", since)
}

// AccountEvents pages the connected account's GET /v1/events (its
// Stripe-Account) since since, newest first.
func (s *Stripe) AccountEvents(ctx context.Context, account string, since time.Time) ([]Pulled, error) {
	return s.events(ctx, account, since)
}

func (s *Stripe) events(ctx context.Context, account string, since time.Time) ([]Pulled, error) {
	what := "stripe events"
	if account != "" {
		what += " of " + account
	}
	var events []Pulled
	for e, err := range s.api.Events(ctx, account, since) {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		events = append(events, Pulled{Body: e.Body})
		if len(events) > maxListed {
			return nil, fmt.Errorf("%s: more than %d since %s", what, maxListed, since.Format(time.RFC3339))
		}
	}
	return events, nil
}

// AccountPayouts lists the connected account's payouts (its
// Stripe-Account) created since since that carry our metadata[payout_id].
func (s *Stripe) AccountPayouts(ctx context.Context, account string, since time.Time) ([]Object, error) {
	var out []Object
	for po, err := range s.api.Payouts(ctx, stripeapi.PayoutQuery{Account: account, Since: since}) {
		if err != nil {
			return nil, fmt.Errorf("stripe payouts of %s: %w", account, err)
		}
		if po.Metadata["payout_id"] != "" {
			out = append(out, stripePayoutObject(po, account))
		}
		if len(out) > maxListed {
			return nil, fmt.Errorf("stripe payouts of %s: more than %d", account, maxListed)
		}
	}
	return out, nil
}

// LookupAccountPayout reads one payout of the connected account.
func (s *Stripe) LookupAccountPayout(ctx context.Context, account, pspID string) (Object, error) {
	if pspID == "" {
		return Object{}, ErrNotFound
	}
	po, err := s.api.Payout(ctx, account, pspID)
	if stripeapi.IsNotFound(err) {
		return Object{}, ErrNotFound
	}
	if err != nil {
		return Object{}, fmt.Errorf("stripe lookup %s of %s: %w", pspID, account, err)
	}
	return stripePayoutObject(po, account), nil
}

// stripePayoutObject is a payout of account ("" the platform's).
func stripePayoutObject(po *stripe.Payout, account string) Object {
	o := Object{Kind: KindPayout, ID: po.ID, PayoutID: po.Metadata["payout_id"], Status: string(po.Status),
		Verdict: PSPPending, Amount: po.Amount, Currency: string(po.Currency), Account: account}
	if po.Destination != nil {
		o.Destination = po.Destination.ID
	}
	switch po.Status {
	case stripe.PayoutStatusPaid:
		o.Verdict = PSPPaid
	case stripe.PayoutStatusFailed, stripe.PayoutStatusCanceled:
		o.Verdict = PSPFailed
	}
	return o
}

// stripeTransferObject: a Stripe transfer has no status; it moved the
// money when it was created, unless it was reversed.
func stripeTransferObject(tr *stripe.Transfer) Object {
	o := Object{Kind: KindTransfer, ID: tr.ID, PayoutID: tr.Metadata["payout_id"], Status: "paid",
		Verdict: PSPPaid, Amount: tr.Amount, Currency: string(tr.Currency)}
	if tr.Destination != nil {
		o.Destination = tr.Destination.ID
	}
	if tr.Reversed {
		o.Status, o.Verdict = "reversed", PSPFailed
	}
	return o
}

// Objects lists the payouts and transfers created since since that carry
// our metadata[payout_id] (Stripe cannot filter by metadata).
func (s *Stripe) Objects(ctx context.Context, since time.Time) ([]Object, error) {
	var out []Object
	for po, err := range s.api.Payouts(ctx, stripeapi.PayoutQuery{Since: since}) {
		if err != nil {
			return nil, fmt.Errorf("stripe payouts: %w", err)
		}
		if po.Metadata["payout_id"] != "" {
			out = append(out, stripePayoutObject(po, ""))
		}
		if len(out) > maxListed {
			return nil, fmt.Errorf("stripe payouts: more than %d", maxListed)
		}
	}
	for tr, err := range s.api.Transfers(ctx, stripeapi.TransferQuery{Since: since}) {
		if err != nil {
			return nil, fmt.Errorf("stripe transfers: %w", err)
		}
		if tr.Metadata["payout_id"] != "" {
			out = append(out, stripeTransferObject(tr))
		}
		if len(out) > maxListed {
			return nil, fmt.Errorf("stripe transfers: more than %d", maxListed)
		}
	}
	return out, nil
}

// Lookup reads a payout (po_…) or transfer (tr_…) by its Stripe id.
func (s *Stripe) Lookup(ctx context.Context, _, pspID string) (Object, error) {
	if pspID == "" {
		return Object{}, ErrNotFound
	}
	var (
		o   Object
		err error
	)
	if strings.HasPrefix(pspID, "tr_") {
		var tr *stripe.Transfer
		if tr, err = s.api.Transfer(ctx, pspID); err == nil {
			o = stripeTransferObject(tr)
		}
	} else {
		var po *stripe.Payout
		if po, err = s.api.Payout(ctx, "", pspID); err == nil {
			o = stripePayoutObject(po, "")
		}
	}
	if stripeapi.IsNotFound(err) {
		return Object{}, ErrNotFound
	}
	if err != nil {
		return Object{}, fmt.Errorf("stripe lookup %s: %w", pspID, err)
	}
	return o, nil
}

// Paystack reads Paystack's record over its JSON API. Paystack has no
// events API: its transactions and transfers are listed, and each decided
// one stands for the event its webhook carries (charge.success,
// transfer.success|failed|reversed), rendered with the object as data so
// that it normalises to the same identity (event name and data.id) as the
// webhook.
type Paystack struct {
	api *paystackapi.Client
	// ReturnsLookback widens the refund and dispute listings before the
	// window: Paystack filters them on their creation time, and a refund
	// processed or a dispute resolved now may have been created well
	// before (PSP_RECONCILE_WINDOW in webhook-api). Re-reading is cheap:
	// events already stored are skipped.
	ReturnsLookback time.Duration
}

// NewPaystack returns Paystack's record as api reads it.
func NewPaystack(api *paystackapi.Client) *Paystack { return &Paystack{api: api} }

// Provider is "paystack".
func (p *Paystack) Provider() string { return string(provider.Paystack) }

// list pages a Paystack list; a 404 is ErrNotFound.
func (p *Paystack) list(ctx context.Context, path string, since time.Time) ([]json.RawMessage, error) {
	items, err := p.api.List(ctx, path, since)
	if errors.Is(err, paystackapi.ErrNotFound) {
		return nil, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	return items, err
}

type paystackTransfer struct {
	ID           json.Number     `json:"id"`
	Reference    string          `json:"reference"`
	TransferCode string          `json:"transfer_code"`
	Status       string          `json:"status"`
	Amount       int64           `json:"amount"`
	Currency     string          `json:"currency"`
	Recipient    json.RawMessage `json:"recipient"`
}

// recipientCode is the transfer's recipient code (RCP_…, what a payout
// sends): Paystack's API reference shows the list and fetch answers with
// the recipient object (its recipient_code) and the initiate answer with
// the recipient's numeric id, which says nothing comparable ("").
func (t paystackTransfer) recipientCode() string {
	var code string
	if json.Unmarshal(t.Recipient, &code) == nil {
		return code
	}
	var obj struct {
		RecipientCode string `json:"recipient_code"`
	}
	if json.Unmarshal(t.Recipient, &obj) == nil {
		return obj.RecipientCode
	}
	return ""
}

func (t paystackTransfer) object() Object {
	o := Object{Kind: KindTransfer, ID: t.TransferCode, PayoutID: t.Reference, Status: t.Status, Verdict: PSPPending,
		Amount: t.Amount, Currency: strings.ToLower(t.Currency), Destination: t.recipientCode()}
	// Paystack's transfer statuses ("How transfers work"): success is paid;
	// failed, reversed, abandoned (no OTP within 30 minutes), blocked and
	// rejected (the approval server did not approve it) are conclusive
	// without the money leaving; pending, received and otp are not
	// conclusive. payout-worker's psp.PaystackStatus maps them the same.
	switch t.Status {
	case "success":
		o.Verdict = PSPPaid
	case "failed", "reversed", "abandoned", "blocked", "rejected":
		o.Verdict = PSPFailed
	}
	return o
}

// transferEvent is the webhook a decided transfer's state stands for.
func (t paystackTransfer) event() event.Type {
	switch t.Status {
	case "success":
		return event.PaystackTransferSuccess
	case "failed":
		return event.PaystackTransferFailed
	case "reversed":
		return event.PaystackTransferReversed
	}
	return ""
}

func paystackEvent(name event.Type, data json.RawMessage) []byte {
	b, _ := json.Marshal(struct {
		Event event.Type      `json:"event"`
		Data  json.RawMessage `json:"data"`
	}{name, data}) // cannot fail: data is JSON the PSP sent
	return b
}

// Events renders successful transactions as charge.success, decided
// transfers as transfer.success|failed|reversed, and refunds and disputes
// as refund.* and charge.dispute.* (returnEvents).
func (p *Paystack) Events(ctx context.Context, since time.Time) ([]Pulled, error) {
	txns, err := p.list(ctx, "/transaction", since)
	if err != nil {
		return nil, err
	}
	var charges []Pulled
	for _, raw := range txns {
		var t struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(raw, &t) == nil && t.Status == "success" {
			charges = append(charges, Pulled{Body: paystackEvent(event.PaystackChargeSuccess, raw)})
		}
	}
	transfers, err := p.list(ctx, "/transfer", since)
	if err != nil {
		return nil, err
	}
	var outcomes []Pulled
	for _, raw := range transfers {
		var t paystackTransfer
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		if name := t.event(); name != "" {
			outcomes = append(outcomes, Pulled{Body: paystackEvent(name, raw)})
		}
	}
	returns, err := p.returnEvents(ctx, since.Add(-p.ReturnsLookback), txns)
	if err != nil {
		return nil, err
	}
	// Newest first, as the run expects (it stores oldest first): the money
	// going back after the transfers, and those after the charges, so that
	// a recovered refund or dispute is stored after its payment's credit.
	out := append(returns, outcomes...)
	return append(out, charges...), nil
}

// paystackTxnRef is the transaction a refund or dispute names: an object
// with its reference, or (as GET /refund lists it) its numeric id.
type paystackTxnRef struct {
	ID        json.Number `json:"id"`
	Reference string      `json:"reference"`
	Amount    json.Number `json:"amount"`
	Currency  string      `json:"currency"`
}

func (r *paystackTxnRef) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		type plain paystackTxnRef
		return json.Unmarshal(b, (*plain)(r))
	}
	if string(b) == "null" {
		return nil
	}
	return json.Unmarshal(b, &r.ID)
}

// returnEvents renders refunds (GET /refund) and disputes (GET /dispute)
// as the webhooks they stand for, with the object as data so that they
// normalise to the webhook's identity (event name and data.id) and the
// ledger's (the refund reference, the dispute id):
//   - a processed refund is refund.processed, a failed one refund.failed
//     (pending ones sent nothing yet);
//   - every dispute is charge.dispute.create, and a resolved one with a
//     resolution is charge.dispute.resolve as well (listed before the
//     create: lists are newest first, and the run stores oldest first).
//
// The data gains what the webhook carries and the list item lacks:
// transaction_reference and refund_reference for refunds. A refund whose
// transaction is only an id is matched to the transactions listed; one
// that cannot be is reported, not guessed.
func (p *Paystack) returnEvents(ctx context.Context, since time.Time, txns []json.RawMessage) ([]Pulled, error) {
	refByID := map[string]string{}
	for _, raw := range txns {
		var t paystackTxnRef
		if json.Unmarshal(raw, &t) == nil && t.ID != "" {
			refByID[t.ID.String()] = t.Reference
		}
	}
	refunds, err := p.list(ctx, "/refund", since)
	if err != nil {
		return nil, err
	}
	var out []datedEvent
	for _, raw := range refunds {
		var r struct {
			UpdatedAt       string          `json:"updatedAt"`
			ID              json.RawMessage `json:"id"`
			RefundReference json.RawMessage `json:"refund_reference"`
			Status          string          `json:"status"`
			Transaction     paystackTxnRef  `json:"transaction"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, fmt.Errorf("paystack refund: %w", err)
		}
		name := map[string]event.Type{"processed": event.PaystackRefundProcessed, "failed": event.PaystackRefundFailed}[r.Status]
		if name == "" {
			continue
		}
		ref := r.Transaction.Reference
		if ref == "" {
			ref = refByID[r.Transaction.ID.String()]
		}
		if ref == "" {
			return nil, fmt.Errorf("paystack refund %s: transaction %s not found in the listed transactions", raw2s(r.ID), r.Transaction.ID)
		}
		extra := map[string]any{"transaction_reference": ref}
		if len(r.RefundReference) == 0 || string(r.RefundReference) == "null" {
			extra["refund_reference"] = json.RawMessage(r.ID)
		}
		data, err := withFields(raw, extra)
		if err != nil {
			return nil, fmt.Errorf("paystack refund %s: %w", raw2s(r.ID), err)
		}
		out = append(out, datedEvent{at: paystackAt(r.UpdatedAt), p: Pulled{Body: paystackEvent(name, data)}})
	}
	disputes, err := p.list(ctx, "/dispute", since)
	if err != nil {
		return nil, err
	}
	for _, raw := range disputes {
		var d struct {
			Status     string `json:"status"`
			Resolution string `json:"resolution"`
			CreatedAt  string `json:"createdAt"`
			ResolvedAt string `json:"resolvedAt"`
			UpdatedAt  string `json:"updatedAt"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, fmt.Errorf("paystack dispute: %w", err)
		}
		if d.Status == "resolved" && (d.Resolution == "merchant-accepted" || d.Resolution == "declined") {
			at := paystackAt(d.ResolvedAt)
			if at.IsZero() {
				at = paystackAt(d.UpdatedAt)
			}
			out = append(out, datedEvent{at: at, p: Pulled{Body: paystackEvent(event.PaystackDisputeResolve, raw)}})
		}
		out = append(out, datedEvent{at: paystackAt(d.CreatedAt), later: 1, p: Pulled{Body: paystackEvent(event.PaystackDisputeCreate, raw)}})
	}
	// Newest first across both lists; a dispute's resolve before its create.
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].at.Equal(out[j].at) {
			return out[i].at.After(out[j].at)
		}
		return out[i].later < out[j].later
	})
	pulled := make([]Pulled, len(out))
	for i, e := range out {
		pulled[i] = e.p
	}
	return pulled, nil
}

// datedEvent is a rendered event with the time it stands for; later 1
// sorts it after others of the same time (newest first: older).
type datedEvent struct {
	at    time.Time
	later int
	p     Pulled
}

// paystackAt reads a Paystack time (zero when absent or unreadable).
func paystackAt(v string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}
	}
	return t
}

func raw2s(b json.RawMessage) string { return strings.Trim(string(b), `"`) }

// withFields adds fields to a JSON object (keeping the others byte for byte).
func withFields(raw json.RawMessage, fields map[string]any) (json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	for k, v := range fields {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		m[k] = b
	}
	return json.Marshal(m)
}

// Objects lists the transfers created since since.
func (p *Paystack) Objects(ctx context.Context, since time.Time) ([]Object, error) {
	transfers, err := p.list(ctx, "/transfer", since)
	if err != nil {
		return nil, err
	}
	out := make([]Object, 0, len(transfers))
	for _, raw := range transfers {
		var t paystackTransfer
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("paystack transfer: %w", err)
		}
		out = append(out, t.object())
	}
	return out, nil
}

// Lookup verifies a transfer by its reference, our payout id.
func (p *Paystack) Lookup(ctx context.Context, payoutID, _ string) (Object, error) {
	ans, err := p.api.VerifyTransfer(ctx, payoutID)
	if err != nil {
		return Object{}, err
	}
	if err := ans.Err("/transfer/verify"); errors.Is(err, paystackapi.ErrNotFound) {
		return Object{}, ErrNotFound
	} else if err != nil {
		return Object{}, err
	}
	var t paystackTransfer
	if err := json.Unmarshal(ans.Data, &t); err != nil {
		return Object{}, fmt.Errorf("paystack transfer %s: %w", payoutID, err)
	}
	return t.object(), nil
}
