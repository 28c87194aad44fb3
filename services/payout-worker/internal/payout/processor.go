package payout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/consume"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/psp"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/walletlock"
)

// Config tunes payouts.
type Config struct {
	// Backoff is the PSP retry schedule: 5s base, ×2, cap 60s, 5 attempts.
	Backoff backoff.Policy
	// BreakerDefer is how far a payout is deferred while its PSP's breaker
	// is open.
	BreakerDefer time.Duration
	// CallTimeout bounds one PSP call.
	CallTimeout time.Duration
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var errs []error
	if err := c.Backoff.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("PSP backoff: %w", err))
	}
	if c.BreakerDefer <= 0 {
		errs = append(errs, errors.New("PSP_BREAKER_DEFER must be positive"))
	}
	if c.CallTimeout <= 0 {
		errs = append(errs, errors.New("PSP_CALL_TIMEOUT must be positive"))
	}
	return errors.Join(errs...)
}

// Processor runs payouts.
type Processor struct {
	pool    *pgxpool.Pool
	ledger  *ledger.Ledger
	psps    psp.Registry
	locks   *walletlock.Locker
	cfg     Config
	logger  *slog.Logger
	now     func() time.Time
	metrics *Metrics
	alerts  *alert.Alerter
}

// New returns a Processor.
func New(pool *pgxpool.Pool, l *ledger.Ledger, psps psp.Registry, locks *walletlock.Locker, cfg Config,
	logger *slog.Logger, m *Metrics, alerts *alert.Alerter, now func() time.Time) (*Processor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Processor{pool: pool, ledger: l, psps: psps, locks: locks, cfg: cfg, logger: logger, now: now, metrics: m, alerts: alerts}, nil
}

func (p *Payout) ledgerPayout() ledger.Payout {
	return ledger.Payout{ID: p.ID.String(), UserID: p.UserID, Provider: p.Provider, Amount: p.Amount, Currency: p.Currency}
}

// Process handles one payout command from aegis.transactions.
func (pr *Processor) Process(ctx context.Context, m consume.Message) error {
	var cmd event.PayoutRequested
	if err := json.Unmarshal(m.Value, &cmd); err != nil || cmd.PayoutID == "" || cmd.UserID == "" {
		return errclass.AsPoison(fmt.Errorf("payout command is not decodable: %v", err))
	}
	if err := pr.ledger.Prepare(ctx, cmd.Provider, cmd.Currency); err != nil {
		return err
	}
	lock, err := pr.locks.Acquire(ctx, cmd.UserID)
	if err != nil {
		return err
	}
	defer lock.Release()
	ctx = lock.Context()

	// 1. Hold the money and mark the payout as being sent.
	var po *Payout
	call := false
	err = database.InTx(ctx, pr.pool, func(tx pgx.Tx) error {
		if done, err := consume.Processed(ctx, tx, m); err != nil || done {
			return err
		}
		if po, err = load(ctx, tx, cmd.PayoutID); err != nil {
			return err
		}
		switch po.Status {
		case Initialized:
			err := pr.ledger.Hold(ctx, tx, po.ledgerPayout())
			if errors.Is(err, ledger.ErrInsufficientFunds) {
				// A business refusal, not a failure to fix: the payout ends
				// here, visible on the payout and in its outcome event.
				if _, err := move(ctx, tx, po,
					step{to: Failed, err: "insufficient funds in the wallet", class: string(errclass.Permanent)},
					step{to: Finalized}); err != nil {
					return err
				}
				if err := pr.outcome(ctx, tx, po, "insufficient funds in the wallet"); err != nil {
					return err
				}
				_, err = consume.Claim(ctx, tx, m)
				return err
			}
			if err != nil && !errors.Is(err, ledger.ErrAlreadyPosted) {
				return err
			}
			call = true
			_, err = move(ctx, tx, po, step{to: Sending})
			return err
		case Retrying, NeedsReview:
			// NEEDS_REVIEW only gets a command when an operator replays its
			// dead letter: try once more with the same Idempotency-Key, which
			// returns the PSP's payout if the lost attempt did execute.
			call = true
			_, err := move(ctx, tx, po, step{to: Sending})
			return err
		case Sending:
			// A previous delivery crashed after (or during) its PSP call:
			// call again with the same key; the PSP answers with what it did.
			call = true
			return nil
		default:
			// Already sent or finished: a stale or duplicate command.
			_, err := consume.Claim(ctx, tx, m)
			return err
		}
	})
	if err != nil || !call {
		return pr.unknownPayout(ctx, m, err)
	}

	// 2. Call the PSP.
	client, err := pr.psps.Get(po.Provider)
	var res psp.Result
	if err == nil {
		callCtx, cancel := context.WithTimeout(ctx, pr.cfg.CallTimeout)
		res, err = client.CreatePayout(callCtx, psp.Request{PayoutID: po.ID.String(), Amount: po.Amount,
			Currency: po.Currency, Destination: po.Destination})
		cancel()
	} else {
		err = errclass.AsPermanent(err)
	}
	if ctx.Err() != nil {
		// Shutting down or the wallet lock is lost: record nothing; the
		// redelivered message resumes from SENDING_TO_GATEWAY.
		return fmt.Errorf("payout %s interrupted after its PSP call: %w", po.ID, context.Cause(ctx))
	}
	pr.metrics.calls.WithLabelValues(po.Provider, string(resultClass(err))).Inc()

	// 3. Record what the PSP said.
	return database.InTx(ctx, pr.pool, func(tx pgx.Tx) error {
		cur, err2 := load(ctx, tx, po.ID.String())
		if err2 != nil {
			return err2
		}
		if cur.Status != Sending {
			// A webhook settled it while we were calling.
			_, err := consume.Claim(ctx, tx, m)
			return err
		}
		if err := pr.record(ctx, tx, cur, m, res, err); err != nil {
			return err
		}
		_, claimErr := consume.Claim(ctx, tx, m)
		return claimErr
	})
}

// unknownPayout turns "no such payout" into a dead letter: an operator must
// look at a command for a payout that does not exist.
func (pr *Processor) unknownPayout(ctx context.Context, m consume.Message, err error) error {
	if !errors.Is(err, ErrUnknownPayout) {
		return err
	}
	return database.InTx(ctx, pr.pool, func(tx pgx.Tx) error {
		if _, err := consume.Claim(ctx, tx, m); err != nil {
			return err
		}
		return pr.deadLetter(ctx, tx, m, err, errclass.Permanent, nil)
	})
}

// record applies the PSP's answer (res, callErr) to a payout in
// SENDING_TO_GATEWAY.
func (pr *Processor) record(ctx context.Context, tx pgx.Tx, p *Payout, m consume.Message, res psp.Result, callErr error) error {
	class := errclass.Of(callErr)
	now := pr.now()
	switch {
	case callErr == nil:
		p.Attempts++
		p.PSPReference, p.PSPStatus = res.Reference, res.Status
		steps := []step{{to: Sent, detail: map[string]any{"psp_reference": res.Reference, "psp_status": res.Status}}}
		if res.Final {
			if err := pr.ledger.Settle(ctx, tx, p.ledgerPayout()); err != nil && !errors.Is(err, ledger.ErrAlreadyPosted) {
				return err
			}
			steps = append(steps, step{to: Succeeded})
		} else {
			steps = append(steps, step{to: Awaiting})
		}
		if _, err := move(ctx, tx, p, steps...); err != nil {
			return err
		}
		pr.logger.InfoContext(ctx, "payout sent to PSP", "payout_id", p.ID, "psp_reference", res.Reference, "status", p.Status)
		if p.Status == Succeeded {
			return pr.outcome(ctx, tx, p, "")
		}
		return nil

	case class == errclass.BreakerOpen:
		return pr.retry(ctx, tx, p, callErr, class, now.Add(pr.cfg.BreakerDefer))

	case class == errclass.Transient:
		if d, ok := errclass.RetryAfterOf(callErr); ok {
			// The PSP told us when: honour it without spending an attempt.
			return pr.retry(ctx, tx, p, callErr, "rate_limited", now.Add(d))
		}
		p.Attempts++
		if !pr.cfg.Backoff.Exhausted(p.Attempts) {
			return pr.retry(ctx, tx, p, callErr, class, now.Add(pr.cfg.Backoff.Delay(p.Attempts)))
		}
		if psp.OutcomeUnknown(callErr) {
			// The last attempt may have paid: keep the hold, ask a person.
			msg := "retries exhausted; the PSP may have executed the last attempt: " + callErr.Error()
			if _, err := move(ctx, tx, p, step{to: NeedsReview, err: msg, class: string(class)}); err != nil {
				return err
			}
			if err := pr.outcome(ctx, tx, p, msg); err != nil {
				return err
			}
			return pr.deadLetter(ctx, tx, m, errors.New(msg), class, p)
		}
		return pr.fail(ctx, tx, p, m, "retries exhausted: "+callErr.Error(), class)

	default: // permanent: the PSP refused it, so nothing was paid
		p.Attempts++
		return pr.fail(ctx, tx, p, m, callErr.Error(), errclass.Permanent)
	}
}

// fail ends a payout that certainly was not paid: FAILED, the hold released
// (once: the release is unique per payout), FINALIZED, a dead letter and the
// outcome event.
func (pr *Processor) fail(ctx context.Context, tx pgx.Tx, p *Payout, m consume.Message, reason string, class errclass.Class) error {
	if err := pr.ledger.Release(ctx, tx, p.ledgerPayout()); err != nil && !errors.Is(err, ledger.ErrAlreadyPosted) {
		return err
	}
	if _, err := move(ctx, tx, p, step{to: Failed, err: reason, class: string(class)}, step{to: Finalized}); err != nil {
		return err
	}
	pr.logger.WarnContext(ctx, "payout failed; hold released", "payout_id", p.ID, "error_class", string(class), "error", reason)
	if err := pr.outcome(ctx, tx, p, reason); err != nil {
		return err
	}
	return pr.deadLetter(ctx, tx, m, errors.New(reason), class, p)
}

// retry schedules the next attempt through the outbox: the consumer never
// sleeps on a partition.
func (pr *Processor) retry(ctx context.Context, tx pgx.Tx, p *Payout, cause error, class errclass.Class, at time.Time) error {
	tid, err := move(ctx, tx, p, step{to: Retrying, err: cause.Error(), class: string(class),
		detail: map[string]any{"next_attempt_at": at.UTC()}})
	if err != nil {
		return err
	}
	cmd, err := json.Marshal(event.PayoutRequested{PayoutID: p.ID.String(), UserID: p.UserID, Amount: p.Amount,
		Currency: p.Currency, Provider: p.Provider, Attempt: p.Attempts})
	if err != nil {
		return fmt.Errorf("encode payout retry: %w", err)
	}
	corr := p.CorrelationID
	_, err = outbox.Insert(ctx, tx, outbox.Message{
		Topic: kafkax.TopicTransactions, EventType: event.TypePayoutRequested, PartitionKey: p.UserID,
		Payload: cmd, CorrelationID: corr, NotBefore: at,
		Headers: map[string]string{
			kafkax.HeaderCorrelationID: corr,
			kafkax.HeaderEventType:     event.TypePayoutRequested,
			kafkax.HeaderMessageID:     "payout:" + p.ID.String() + ":retry:" + strconv.FormatInt(tid, 10),
		},
	})
	if err != nil {
		return err
	}
	pr.metrics.retries.WithLabelValues(p.Provider, string(class)).Inc()
	pr.logger.WarnContext(ctx, "payout attempt failed; retry scheduled", "payout_id", p.ID, "attempts", p.Attempts,
		"error_class", string(class), "next_attempt_at", at.UTC(), "error", cause.Error())
	return nil
}

// deadLetter writes the message's dead letter through the outbox in tx,
// with the payout's attempt history, and raises the alert: a log line and a
// metric (ARCHITECTURE.md, promise 3).
func (pr *Processor) deadLetter(ctx context.Context, tx pgx.Tx, m consume.Message, cause error, class errclass.Class, p *Payout) error {
	f := consume.Failure{Err: cause, Class: class}
	if p != nil {
		h, err := history(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		for _, a := range h {
			f.History = append(f.History, dlq.Attempt{At: a.At, Error: a.Error, Class: a.Class})
		}
		f.RetryCount = p.Attempts
	}
	l, err := consume.DeadLetter(ctx, tx, m, f, pr.now())
	if err != nil {
		return err
	}
	pr.metrics.deadLettered.WithLabelValues(m.Topic, string(class)).Inc()
	details := map[string]any{"topic": m.Topic, "partition": m.Partition, "offset": m.Offset,
		"error_class": string(class), "dlq_topic": l.Topic()}
	if p != nil {
		details["payout_id"] = p.ID.String()
		details["status"] = p.Status
	}
	// Raised before the commit: if the transaction then fails, the record is
	// retried and may alert again — an extra page beats a missed one.
	pr.alerts.Raise(ctx, alert.Alert{Key: "dead_letter:" + m.Topic + ":" + string(class), Severity: alert.Error,
		Summary: "payout needs attention: " + cause.Error(), Details: details})
	return nil
}

// outcome publishes a finished payout on aegis.settlements.
func (pr *Processor) outcome(ctx context.Context, tx pgx.Tx, p *Payout, reason string) error {
	body, err := json.Marshal(event.PayoutOutcome{PayoutID: p.ID.String(), UserID: p.UserID, Status: p.Status,
		Amount: p.Amount, Currency: p.Currency, Provider: p.Provider, PSPReference: p.PSPReference,
		Error: reason, OccurredAt: pr.now().UTC()})
	if err != nil {
		return fmt.Errorf("encode payout outcome: %w", err)
	}
	typ := event.TypePayoutSucceeded
	if p.Status != Succeeded {
		typ = event.TypePayoutFailed
	}
	pr.metrics.finished.WithLabelValues(p.Provider, p.Status).Inc()
	_, err = outbox.Insert(ctx, tx, outbox.Message{
		Topic: kafkax.TopicSettlements, EventType: typ, PartitionKey: p.UserID, Payload: body,
		CorrelationID: p.CorrelationID,
		Headers: map[string]string{
			kafkax.HeaderCorrelationID: p.CorrelationID,
			kafkax.HeaderEventType:     typ,
			kafkax.HeaderMessageID:     "payout:" + p.ID.String() + ":" + p.Status,
		},
	})
	return err
}

func resultClass(err error) errclass.Class {
	if err == nil {
		return "ok"
	}
	return errclass.Of(err)
}

// Metrics are the payout metrics.
type Metrics struct {
	calls        *prometheus.CounterVec
	retries      *prometheus.CounterVec
	finished     *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
}

// NewMetrics registers them on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_psp_calls_total", Help: "PSP payout calls by provider and result class.",
		}, []string{"provider", "result"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_payout_retries_total", Help: "Payout attempts scheduled again, by provider and reason.",
		}, []string{"provider", "class"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_payouts_finished_total", Help: "Payouts reaching an end state, by provider and state.",
		}, []string{"provider", "status"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_dead_letters_total", Help: "Messages dead-lettered by the worker, by topic and class.",
		}, []string{"topic", "class"}),
	}
	reg.MustRegister(m.calls, m.retries, m.finished, m.deadLettered)
	return m
}
