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

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/consume"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
)

// Handler implements consume.Handler.
type Handler struct {
	pool    *pgxpool.Pool
	ledger  *ledger.Ledger
	payouts *payout.Processor
	logger  *slog.Logger
	now     func() time.Time
	credits *prometheus.CounterVec
}

// New returns a Handler.
func New(pool *pgxpool.Pool, l *ledger.Ledger, p *payout.Processor, logger *slog.Logger, reg prometheus.Registerer, now func() time.Time) *Handler {
	h := &Handler{pool: pool, ledger: l, payouts: p, logger: logger, now: now,
		credits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_wallet_credits_total", Help: "Wallet credits by provider and result (applied, duplicate).",
		}, []string{"provider", "result"}),
	}
	reg.MustRegister(h.credits)
	return h
}

// Handle routes m by topic.
func (h *Handler) Handle(ctx context.Context, m consume.Message) error {
	switch m.Topic {
	case kafkax.TopicWebhookPending:
		return h.pspEvent(ctx, m)
	case kafkax.TopicTransactions:
		return h.payouts.Process(ctx, m)
	}
	return errclass.AsPoison(fmt.Errorf("no handler for topic %s", m.Topic))
}

var currencyRE = regexp.MustCompile(`^[a-z]{3}$`)

func (h *Handler) pspEvent(ctx context.Context, m consume.Message) error {
	var e event.PSPEvent
	if err := json.Unmarshal(m.Value, &e); err != nil || e.EventID == "" || e.Provider == "" {
		return errclass.AsPoison(fmt.Errorf("PSP event is not decodable: %v", err))
	}
	switch e.Action {
	case event.ActionCredit:
		return h.credit(ctx, m, e)
	case event.ActionPayoutPaid, event.ActionPayoutFailed, event.ActionPayoutReversed:
		return h.payouts.Finalize(ctx, m, e)
	}
	return nil
}

func (h *Handler) credit(ctx context.Context, m consume.Message, e event.PSPEvent) error {
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
	}
	result := "applied"
	err := database.InTx(ctx, h.pool, func(tx pgx.Tx) error {
		fresh, err := consume.Claim(ctx, tx, m)
		if err != nil || !fresh {
			result = "duplicate"
			return err
		}
		if problem != nil {
			result = "dead_lettered"
			_, err := consume.DeadLetter(ctx, tx, m, consume.Failure{Err: problem, Class: errclass.Permanent}, h.now())
			return err
		}
		err = h.ledger.Credit(ctx, tx, e.Provider, e.Reference, e.UserID, e.Amount, e.Currency)
		if errors.Is(err, ledger.ErrAlreadyPosted) {
			// Another event about the same payment credited it already.
			result = "duplicate"
			return nil
		}
		return err
	})
	if err != nil {
		return err
	}
	h.credits.WithLabelValues(e.Provider, result).Inc()
	if problem != nil {
		h.logger.ErrorContext(ctx, "dead letter: credit cannot be applied", "event_id", e.EventID, "error", problem.Error())
	}
	return nil
}
