package psp

import (
	"bytes"
	"context"
	"crypto/sha512"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aegis-payments/aegis/pkg/hmacsig"
)

// Run drives auto-settlement and webhook delivery until ctx ends. It
// returns nil after a clean stop (pending deliveries are marked aborted and
// in-flight attempts are cancelled and waited for). Hanging fault requests
// are released when Run returns. Run may be called only once.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return errors.New("psp: Run called more than once")
	}
	s.running = true
	s.mu.Unlock()

	var wg sync.WaitGroup
	defer func() {
		s.closeOnce.Do(func() { close(s.closing) })
		wg.Wait()
		s.abortPending()
		if s.ownTr != nil {
			s.ownTr.CloseIdleConnections()
		}
	}()

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		st := s.st
		now := time.Now()
		due := st.popDue(now)
		var attempts []*delivery
		for _, t := range due {
			switch {
			case t.delivery != nil:
				attempts = append(attempts, t.delivery)
			case t.settleID != "":
				if o := st.byID[t.settleID]; o != nil && !o.settled() {
					fail, code := autoOutcome(o)
					s.settleLocked(st, o, fail, code, now)
				}
			}
		}
		// Settlements may have queued deliveries due now: wait for the
		// earliest task as it is after processing.
		wait := st.nextWait(time.Now())
		s.mu.Unlock()

		for _, d := range attempts {
			wg.Go(func() { s.attempt(ctx, st, d) })
		}

		if wait < 0 {
			wait = time.Hour
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
		case <-timer.C:
		}
	}
}

// nudge wakes Run's scheduler; it never blocks and is safe under s.mu.
func (s *Server) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// abortPending marks deliveries that will never be attempted again.
func (s *Server) abortPending() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, d := range s.st.deliveries {
		if d.rec.State == DeliveryPending {
			d.rec.State = DeliveryAborted
		}
	}
}

// autoOutcome is how an object settles when nobody says otherwise.
func autoOutcome(o *object) (failed bool, failureCode string) {
	switch {
	case o.stripePayout != nil:
		if strings.HasPrefix(o.rec.Destination, "ba_fail") {
			return true, "account_closed"
		}
	case o.stripeTransfer != nil:
		if strings.HasPrefix(o.rec.Destination, "acct_fail") {
			return true, "account_closed"
		}
	case o.paystack != nil:
		if strings.HasPrefix(o.rec.Destination, "RCP_fail") {
			return true, "account_closed"
		}
	}
	return false, ""
}

var payoutFailureMessages = map[string]string{
	"account_closed":                "The bank account has been closed.",
	"account_frozen":                "The bank account has been frozen.",
	"bank_account_restricted":       "The bank account has restrictions on either the type, or the number, of payouts allowed.",
	"could_not_process":             "The bank could not process this payout.",
	"insufficient_funds":            "Your Stripe account has insufficient funds to cover the payout.",
	"invalid_account_number":        "The routing number seems correct, but the account number is invalid.",
	"no_account":                    "The bank account details on file are probably incorrect.",
	"declined":                      "The bank has declined this transfer.",
	"debit_not_authorized":          "Debit transactions are not approved on the bank account.",
	"incorrect_account_holder_name": "Your bank notified us that the bank account holder name on file is incorrect.",
}

// settleLocked moves o to its final status and queues its webhook.
func (s *Server) settleLocked(st *state, o *object, failed bool, failureCode string, now time.Time) {
	if failed && failureCode == "" {
		failureCode = "account_closed"
	}
	settledAt := now.UTC()
	o.rec.SettledAt = &settledAt
	var event string
	switch {
	case o.stripePayout != nil:
		p := o.stripePayout
		if failed {
			msg, ok := payoutFailureMessages[failureCode]
			if !ok {
				msg = "The payout failed (" + failureCode + ")."
			}
			code := failureCode
			fbt := newID("txn_", 24)
			p.Status, p.FailureCode, p.FailureMessage, p.FailureBalanceTransaction = "failed", &code, &msg, &fbt
			event = "payout.failed"
			if o.rec.Account != "" {
				// Stripe returns a failed payout's amount to the
				// connected account's balance.
				st.postStripe(stripeMove{id: fbt, account: o.rec.Account, typ: "payout_failure", category: "payout_reversal",
					currency: p.Currency, source: p.ID, amount: p.Amount}, now)
			}
		} else {
			p.Status = "paid"
			event = "payout.paid"
		}
		o.rec.Status = p.Status
	case o.stripeTransfer != nil:
		if failed {
			// Stripe takes back what is left of the transfer; the
			// reversal sends transfer.reversed.
			o.rec.Status = "failed"
			if o.stripeTransfer.AmountReversed < o.stripeTransfer.Amount {
				_, _ = s.reverseTransferLocked(st, o, 0, nil, true, now) // forced: it cannot be refused
			}
		} else if !o.stripeTransfer.Reversed {
			o.rec.Status = "paid" // Stripe sends no event for this
		}
	case o.paystack != nil:
		t := o.paystack
		t.UpdatedAt = paystackTime(now)
		if failed {
			t.Status = "failed"
			event = "transfer.failed"
			// Paystack returns a failed transfer's amount to the balance.
			st.credit(ProviderPaystack, "", t.Currency, t.Amount)
		} else {
			t.Status = "success"
			ts := paystackTime(now)
			t.TransferredAt = &ts
			event = "transfer.success"
		}
		o.rec.Status = t.Status
	}
	if failed {
		o.rec.FailureCode = failureCode
	}
	s.log.Info("psp object settled",
		slog.String("provider", string(o.rec.Provider)),
		slog.String("kind", o.rec.Kind),
		slog.String("id", o.rec.ID),
		slog.String("payout_id", o.rec.PayoutID),
		slog.String("status", o.rec.Status))
	if event != "" {
		s.enqueueEventLocked(st, o, event, now)
	}
}

// stripeEvent is Stripe's event envelope.
type stripeEvent struct {
	ID     string `json:"id"`
	Object string `json:"object"`
	// Account is the connected account the event happened on (Connect
	// events only; absent on the platform's own).
	Account         string          `json:"account,omitempty"`
	APIVersion      string          `json:"api_version"`
	Created         int64           `json:"created"`
	Data            stripeEventData `json:"data"`
	Livemode        bool            `json:"livemode"`
	PendingWebhooks int             `json:"pending_webhooks"`
	Request         stripeEventReq  `json:"request"`
	Type            string          `json:"type"`
}

type stripeEventData struct {
	Object any `json:"object"`
}

type stripeEventReq struct {
	ID             *string `json:"id"`
	IdempotencyKey *string `json:"idempotency_key"`
}

type paystackEvent struct {
	Event string `json:"event"`
	Data  any    `json:"data"`
}

// enqueueEventLocked renders o's event now (so it carries the object as it
// is at this moment) and queues its delivery if a URL is configured.
func (s *Server) enqueueEventLocked(st *state, o *object, eventType string, now time.Time) {
	var url, eventID string
	var body []byte
	switch o.rec.Provider {
	case ProviderStripe:
		var obj any = o.stripePayout
		if o.stripeTransfer != nil {
			obj = o.stripeTransfer
		}
		// Recorded whether or not it is sent: GET /v1/events lists it.
		eventID, body = s.recordStripeEventLocked(st, eventType, o.rec.Account, obj, now)
		url = s.cfg.StripeWebhookURL
		if url == "" {
			return
		}
	case ProviderPaystack:
		url = s.cfg.PaystackWebhookURL
		if url == "" {
			return
		}
		// Paystack events carry no id; the transfer_code + event names it.
		eventID = o.rec.ID + ":" + eventType
		body = mustJSON(paystackEvent{Event: eventType, Data: o.paystack})
	default:
		return
	}
	d := s.deliverLocked(st, o.rec.Provider, o.rec.ID, eventID, eventType, url, body, now)
	// drop_webhook_rate loses payout outcome events only: what the worker's
	// sweeper recovers by looking the payout up. (Refund and dispute events
	// wait for the PSP reconciliation that would recover them.)
	if r := s.faults[o.rec.Provider].spec.DropWebhookRate; r > 0 && s.rng.Float64() < r {
		d.rec.State = DeliveryDropped
		s.log.Warn("webhook dropped (fault drop_webhook_rate)", slog.String("event_id", eventID),
			slog.String("type", eventType), slog.String("object_id", o.rec.ID), slog.String("payout_id", o.rec.PayoutID))
		return
	}
	s.scheduleLocked(st, d, now)
}

// deliverLocked records one event delivery (signed when it is sent); the
// caller schedules it (scheduleLocked) or records it as dropped.
func (s *Server) deliverLocked(st *state, p Provider, objectID, eventID, eventType, url string, body []byte, now time.Time) *delivery {
	d := &delivery{
		rec: WebhookRecord{
			EventID:   eventID,
			Type:      eventType,
			Provider:  p,
			ObjectID:  objectID,
			URL:       url,
			State:     DeliveryPending,
			CreatedAt: now.UTC(),
		},
		body:     body,
		provider: p,
	}
	st.deliveries = append(st.deliveries, d)
	return d
}

// scheduleLocked sends a recorded delivery now.
func (s *Server) scheduleLocked(st *state, d *delivery, now time.Time) {
	st.schedule(&task{due: now, delivery: d})
	s.nudge()
}

// StripeSignature returns the Stripe-Signature header value for payload.
func StripeSignature(secret string, t time.Time, payload []byte) string {
	return hmacsig.SignTimestamped([]byte(secret), t, payload)
}

// PaystackSignature returns the x-paystack-signature header value for payload.
func PaystackSignature(secretKey string, payload []byte) string {
	return hmacsig.Hex(sha512.New, []byte(secretKey), payload)
}

// attempt makes one delivery attempt and schedules the next on failure.
func (s *Server) attempt(ctx context.Context, st *state, d *delivery) {
	s.mu.Lock()
	d.rec.Attempts++
	n := d.rec.Attempts
	now := time.Now().UTC()
	d.rec.LastAttemptAt = &now
	url := d.rec.URL
	s.mu.Unlock()

	status, err := s.post(ctx, url, d.provider, d.body)

	s.mu.Lock()
	defer s.mu.Unlock()
	d.rec.LastStatus = status
	d.rec.LastError = ""
	if err != nil {
		d.rec.LastError = err.Error()
	}
	attrs := []slog.Attr{
		slog.String("event_id", d.rec.EventID),
		slog.String("type", d.rec.Type),
		slog.String("url", url),
		slog.Int("attempt", n),
		slog.Int("status", status),
	}
	switch {
	case err == nil && status >= 200 && status < 300:
		d.rec.State = DeliveryDelivered
		s.log.LogAttrs(ctx, slog.LevelInfo, "webhook delivered", attrs...)
	case ctx.Err() != nil:
		d.rec.State = DeliveryAborted
	case n >= s.cfg.WebhookMaxAttempts:
		d.rec.State = DeliveryFailed
		s.log.LogAttrs(ctx, slog.LevelWarn, "webhook delivery failed, giving up", append(attrs, slog.String("error", d.rec.LastError))...)
	default:
		backoff := s.cfg.WebhookBackoff << (n - 1)
		s.log.LogAttrs(ctx, slog.LevelWarn, "webhook delivery failed, will retry", append(attrs, slog.String("error", d.rec.LastError), slog.Duration("backoff", backoff))...)
		if s.st == st { // dropped if the state was wiped meanwhile
			st.schedule(&task{due: time.Now().Add(backoff), delivery: d})
			s.nudge()
		}
	}
}

func (s *Server) post(ctx context.Context, url string, p Provider, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.WebhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	switch p {
	case ProviderStripe:
		req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks) aegis-psp-standin")
		req.Header.Set("Stripe-Signature", StripeSignature(s.cfg.StripeWebhookSecret, time.Now(), body))
	case ProviderPaystack:
		req.Header.Set("User-Agent", "aegis-psp-standin (paystack)")
		req.Header.Set("x-paystack-signature", PaystackSignature(s.cfg.PaystackSecretKey, body))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("post webhook: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}
