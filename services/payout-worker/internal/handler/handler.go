package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/origin"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
)

// Handler is the consumer's handler (consume.Handler): it routes messages by topic.
type Handler struct {
	notify      interface{ Notify() }
	alerts      *alert.Alerter
	letters     *dlq.Writer
	pool        *pgxpool.Pool
	ledger      *ledger.Ledger
	credits     *ledger.CreditCommitter
	payouts     *payout.Processor
	logger      *slog.Logger
	now         func() time.Time
	creditCount *prometheus.CounterVec
	returns     *prometheus.CounterVec
	// creditWait: a refund or dispute whose payment's credit is not in
	// yet waits for it (awaitCredit).
	creditWait time.Duration
	// stripeLivemode is our Stripe key's mode (foreign.go).
	stripeLivemode bool
	// proof verifies that webhook-api signed a money event (proof.go).
	proof         *eventproof.Keys
	unprovenCount *prometheus.CounterVec
}

// Deps is what a Handler works with, next to the logger, clock and
// registry (its metrics are registered there) every component gets.
type Deps struct {
	lifecycle.Deps
	Pool   *pgxpool.Pool
	Ledger *ledger.Ledger
	// Credits commits credits in groups (started and stopped by the
	// caller, after the consumer); nil commits each alone (CreditOnce).
	Credits *ledger.CreditCommitter
	Payouts *payout.Processor
	Alerts  *alert.Alerter
	// Letters writes the dead letters of credits that cannot be applied.
	Letters *dlq.Writer
	// Notify wakes the relays after a commit that wrote outbox rows.
	Notify interface{ Notify() }
	// CreditWait is MONEY_BACK_CREDIT_WAIT: how long a refund or dispute
	// of a payment not credited yet is published again, delayed, waiting
	// for the credit, before it is dead-lettered (0: at once).
	CreditWait time.Duration
	// StripeLivemode is true for a live Stripe key: Stripe money events of
	// the other mode, or from a connected account, move no money (foreign.go).
	StripeLivemode bool
	// Proof verifies that webhook-api verified each money event
	// (AEGIS_EVENT_SIGNING_KEY); nil refuses them all.
	Proof *eventproof.Keys
}

// New returns a Handler.
func New(deps Deps) *Handler {
	common := deps.WithDefaults()
	reg := common.Registerer
	h := &Handler{pool: deps.Pool, ledger: deps.Ledger, credits: deps.Credits, payouts: deps.Payouts, logger: common.Logger, now: common.Clock,
		alerts: deps.Alerts, letters: deps.Letters, notify: deps.Notify, creditWait: deps.CreditWait,
		stripeLivemode: deps.StripeLivemode,
		creditCount: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_wallet_credits_total", Help: "Wallet credits by provider and result (applied, duplicate).",
		}, []string{"provider", "result"}),
	}
	h.returns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aegis_money_back_total", Help: "Refund and dispute objects by provider, kind and result (posted, unchanged, dead_lettered).",
	}, []string{"provider", "kind", "result"})
	h.proof = deps.Proof
	h.unprovenCount = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aegis_unproven_events_total", Help: "Money events refused for want of a valid proof that webhook-api verified them, by provider and action.",
	}, []string{"provider", "action"})
	reg.MustRegister(h.creditCount, h.returns, h.unprovenCount)
	return h
}

// Handle routes m by topic.
func (h *Handler) Handle(ctx context.Context, m inbox.Message) error {
	switch m.Topic {
	case kafkax.TopicWebhookPending:
		return h.pspEvent(ctx, m)
	case kafkax.TopicTransactions:
		if event.Type(m.Headers[kafkax.HeaderEventType]) == event.TypePayoutResolution {
			return h.wroteOutbox(h.payouts.Resolve(ctx, m))
		}
		return h.wroteOutbox(h.payouts.Process(ctx, m))
	}
	return errclass.AsPoison(fmt.Errorf("no handler for topic %s", m.Topic))
}

// wroteOutbox wakes the relays after a committed transaction that may have
// written outbox rows (a retry, a settlement, a dead letter). Credits, the
// bulk of the traffic, write none and do not wake them.
func (h *Handler) wroteOutbox(err error) error {
	if err == nil {
		h.notify.Notify()
	}
	return err
}

var currencyRE = regexp.MustCompile(`^[a-z]{3}$`)

func (h *Handler) pspEvent(ctx context.Context, m inbox.Message) error {
	var e event.PSPEvent
	if err := json.Unmarshal(m.Value, &e); err != nil {
		return errclass.AsPoison(fmt.Errorf("PSP event is not decodable: %w", err))
	}
	if e.EventID == "" || e.Provider == "" {
		return errclass.AsPoison(errors.New("PSP event is not decodable: no event_id or provider"))
	}
	if refused, err := h.unproven(ctx, m, e); refused {
		return err
	}
	if moneyEvent(e.Action) {
		if foreign := origin.Foreign(&e, h.stripeLivemode); foreign != "" {
			return h.refuseForeign(ctx, m, e, foreign)
		}
	}
	switch e.Action {
	case event.ActionCredit:
		return h.credit(ctx, m, e)
	case event.ActionPayoutPaid, event.ActionPayoutFailed, event.ActionPayoutReversed:
		return h.wroteOutbox(h.payouts.Finalize(ctx, m, e))
	case event.ActionRefund, event.ActionDispute:
		return h.moneyBack(ctx, m, e)
	}
	return nil
}

func (h *Handler) credit(ctx context.Context, m inbox.Message, e event.PSPEvent) error {
	var problem error
	switch {
	case e.UserID == "":
		problem = errors.New("credit without a user id")
	case e.Amount <= 0:
		problem = fmt.Errorf("credit amount %d is not positive", e.Amount)
	case !currencyRE.MatchString(e.Currency):
		problem = fmt.Errorf("credit currency %q is not an ISO 4217 code", e.Currency)
	case e.Reference == "":
		problem = errors.New("credit without a payment reference")
	case e.Fee < 0 || e.Fee > e.Amount:
		problem = fmt.Errorf("credit fee %d is not between 0 and the amount %d", e.Fee, e.Amount)
	}
	if problem == nil {
		claim := ledger.Claim{Group: m.Group, EventID: m.ID()}
		receipt := ledger.Receipt{Provider: e.Provider, Reference: e.Reference, UserID: e.UserID, Amount: e.Amount,
			Fee: e.Fee, Currency: e.Currency}
		var outcome ledger.CreditOutcome
		var err error
		if h.credits != nil {
			outcome, err = h.credits.Credit(ctx, claim, receipt)
		} else {
			outcome, err = h.ledger.CreditOnce(ctx, h.pool, claim, receipt)
		}
		if err != nil {
			return err
		}
		h.creditCount.WithLabelValues(e.Provider, string(outcome)).Inc()
		return nil
	}
	result := "duplicate"
	err := inbox.InTx(ctx, h.pool, m, func(tx pgx.Tx) error {
		result = "dead_lettered"
		return h.letters.Stage(ctx, tx, m.Letter().WithFailure(dlq.Failure{Err: problem, Class: errclass.Permanent}, h.now()))
	})
	if err != nil {
		return err
	}
	h.creditCount.WithLabelValues(e.Provider, result).Inc()
	if result == "dead_lettered" {
		// The letter pages from dlq-admin once stored (alert.DeadLetterKey).
		h.notify.Notify()
	}
	return nil
}
