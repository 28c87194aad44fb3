package handler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
)

// moneyBack applies a refund or dispute event: evidence about PSP objects
// that take money back from a payment we credited. Each object is brought
// to the event's outcome in one transaction with the message's claim. A
// refund or dispute that arrives before its payment's credit (a dropped
// payment webhook recovered later, a credit still in flight) waits for it
// for MONEY_BACK_CREDIT_WAIT (awaitCredit: a delayed retry). An event the ledger must not act
// on (a payment still not credited after the wait, more than is left of it,
// a currency that does not match) moves no money: it is dead-lettered by
// the consumer with the reason and an alert (refuseMoneyBack).
// Each posting is published on aegis.settlements in the same transaction
// (publishReturn).
func (h *Handler) moneyBack(ctx context.Context, m inbox.Message, e event.PSPEvent) error {
	kind := ledger.ReturnRefund
	if e.Action == event.ActionDispute {
		kind = ledger.ReturnDispute
	}
	problem := moneyBackProblem(e)
	for _, r := range e.Returns {
		if problem != nil || !currencyRE.MatchString(r.Currency) {
			break
		}
		if err := h.ledger.PrepareReturns(ctx, e.Provider, r.Currency); err != nil {
			return err
		}
	}
	var results []ledger.ReturnResult
	if problem == nil {
		err := inbox.InTx(ctx, h.pool, m, func(tx pgx.Tx) error {
			results = results[:0]
			for _, r := range e.Returns {
				res, err := h.ledger.ApplyReturn(ctx, tx, e.Provider, kind, e.Reference, e.MessageID(), r)
				if err != nil {
					return err
				}
				if err := h.publishReturn(ctx, tx, e, r, res); err != nil {
					return err
				}
				results = append(results, res)
			}
			return nil
		})
		switch {
		case errors.Is(err, ledger.ErrNotCredited):
			waited, werr := h.awaitCredit(ctx, m, e, err)
			if werr != nil || waited {
				return werr
			}
			problem = err
			if h.creditWait > 0 {
				problem = fmt.Errorf("%w (waited MONEY_BACK_CREDIT_WAIT %s for its credit)", err, h.creditWait)
			}
		case errors.Is(err, ledger.ErrExceedsRefundable), errors.Is(err, ledger.ErrReturnMismatch):
			problem = err
		case err != nil:
			return err
		}
	}
	if problem != nil {
		return h.refuseMoneyBack(ctx, m, e, problem)
	}
	for i, res := range results {
		r := e.Returns[i]
		h.returns.WithLabelValues(e.Provider, kind, resultOf(res)).Inc()
		if len(res.Posted) > 0 {
			h.logger.InfoContext(ctx, "money back posted", "provider", e.Provider, "kind", kind, "object_id", r.ID,
				"payment", res.Payment.Reference, "user_id", res.Payment.UserID, "state", res.State,
				"posted", strings.Join(res.Posted, ","), "owed", res.Owed)
		}
		if res.Owed > 0 {
			h.alerts.Raise(ctx, alert.Alert{Key: alert.ReceivableKey(res.Payment.UserID), Severity: alert.Error,
				Summary: fmt.Sprintf("user %s owes %d %s: %s %s took more than the wallet held; payouts are blocked until credits repay it",
					res.Payment.UserID, res.Owed, res.Payment.Currency, kind, r.ID),
				Details: map[string]any{"user_id": res.Payment.UserID, "owed": res.Owed, "currency": res.Payment.Currency,
					"provider": e.Provider, "object_id": r.ID, "payment": res.Payment.Reference, "event_id": e.EventID}})
		}
	}
	return nil
}

func resultOf(res ledger.ReturnResult) string {
	if len(res.Posted) == 0 {
		return "unchanged"
	}
	return "posted"
}

func moneyBackProblem(e event.PSPEvent) error {
	if e.Reference == "" {
		return errors.New("refund or dispute without a payment reference")
	}
	if len(e.Returns) == 0 {
		return errors.New("refund or dispute event lists no refund or dispute")
	}
	for _, r := range e.Returns {
		switch {
		case r.ID == "":
			return errors.New("refund or dispute without an id")
		case r.Amount <= 0:
			return fmt.Errorf("%s amount %d is not positive", r.ID, r.Amount)
		case !currencyRE.MatchString(r.Currency):
			return fmt.Errorf("%s currency %q is not an ISO 4217 code", r.ID, r.Currency)
		}
	}
	return nil
}

// refuseMoneyBack refuses the event as permanent without claiming it: the
// consumer dead-letters it (with its alert) and no money moves. Unclaimed,
// a replay is judged afresh: a refund that overtook its payment's credit,
// replayed once the credit is in, is applied then.
func (h *Handler) refuseMoneyBack(_ context.Context, _ inbox.Message, e event.PSPEvent, problem error) error {
	h.returns.WithLabelValues(e.Provider, string(e.Action), "refused").Inc()
	return errclass.AsPermanent(fmt.Errorf("%s %s moves no money: %w", e.Provider, e.Type, problem))
}

// Headers of a refund or dispute re-published to wait for its credit.
const (
	// headerCreditWaitSince is when the first delivery found the payment
	// not credited (RFC 3339): the wait is measured from it.
	headerCreditWaitSince = "credit_wait_since"
	// headerCreditWaitOf is the message id of the first delivery; each
	// re-publication's id is it with "#credit-wait-<n>".
	headerCreditWaitOf      = "credit_wait_of"
	headerCreditWaitAttempt = "credit_wait_attempt"
)

// awaitCredit is the delayed retry of a refund or dispute whose payment is
// not credited yet (a payment webhook dropped and recovered later by the
// PSP reconciliation, a credit still on its way): unless
// MONEY_BACK_CREDIT_WAIT has passed since the first delivery found it so,
// the message is claimed and published again, delayed, through the outbox
// (outbox.Message.NotBefore) in one transaction, and waited is true. It
// does not wait in place: a consumer's next poll waits for its whole
// batch, so the credit could never arrive while it blocked. The copy has
// its own message id (processed once) and its own partition key
// ("credit-wait:" + the original), so that it holds back no other record;
// the ledger keys the posting on the refund or dispute id, so the copy
// posts once whichever delivery applies it. When the wait is spent,
// waited is false and the caller dead-letters it, saying how long it
// waited.
func (h *Handler) awaitCredit(ctx context.Context, m inbox.Message, e event.PSPEvent, cause error) (bool, error) {
	if h.creditWait <= 0 {
		return false, nil
	}
	now := h.now()
	since := now
	if t, err := time.Parse(time.RFC3339Nano, m.Headers[headerCreditWaitSince]); err == nil {
		since = t
	}
	waited := now.Sub(since)
	if waited >= h.creditWait {
		return false, nil
	}
	attempt, _ := strconv.Atoi(m.Headers[headerCreditWaitAttempt])
	attempt++
	of := m.Headers[headerCreditWaitOf]
	if of == "" {
		of = m.ID()
	}
	headers := make(map[string]string, len(m.Headers)+3)
	for k, v := range m.Headers {
		headers[k] = v
	}
	headers[kafkax.HeaderMessageID] = event.CreditWaitID(of, attempt)
	headers[headerCreditWaitOf] = of
	headers[headerCreditWaitSince] = since.UTC().Format(time.RFC3339Nano)
	headers[headerCreditWaitAttempt] = strconv.Itoa(attempt)
	eventType := m.Headers[kafkax.HeaderEventType]
	if eventType == "" {
		eventType = e.Type
	}
	// The credit of a payment in flight comes within seconds; one the PSP
	// reconciliation recovers, within the wait (config.MoneyBackTiming):
	// tried again after 1s, 2s, 4s … up to a tenth of the wait, so the
	// first is applied at once and a long wait costs a few copies.
	delay := min(h.creditWait-waited, backoff.Policy{Base: time.Second, Multiplier: 2,
		Max: max(time.Second, h.creditWait/10)}.Ceiling(attempt))
	err := inbox.InTx(ctx, h.pool, m, func(tx pgx.Tx) error {
		_, err := outbox.Insert(ctx, tx, outbox.Message{Topic: m.Topic, EventType: eventType,
			PartitionKey: creditWaitKey(string(m.Key)), Payload: m.Value, Headers: headers,
			CorrelationID: m.Headers[kafkax.HeaderCorrelationID], NotBefore: now.Add(delay)})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("re-publish %s to wait for its payment's credit: %w", m.ID(), err)
	}
	if h.notify != nil {
		h.notify.Notify()
	}
	kind := ledger.ReturnRefund
	if e.Action == event.ActionDispute {
		kind = ledger.ReturnDispute
	}
	h.returns.WithLabelValues(e.Provider, kind, "waiting_for_credit").Inc()
	h.logger.InfoContext(ctx, "money back waits for its payment's credit", "message_id", m.ID(), "payment", e.Reference,
		"waited", waited.Round(time.Millisecond).String(), "retry_in", delay.String(), "credit_wait", h.creditWait.String(),
		"attempt", attempt, "error", cause.Error())
	return true, nil
}

// creditWaitKey is the partition key of a re-published copy: the original's
// with "credit-wait:" once (a copy of a copy keeps it).
func creditWaitKey(key string) string {
	if strings.HasPrefix(key, "credit-wait:") {
		return key
	}
	return "credit-wait:" + key
}
