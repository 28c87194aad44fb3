package payout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox"
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
	// IdempotencyWindow is how long the PSP keeps an Idempotency-Key
	// (Stripe: 24h; PSP_IDEMPOTENCY_WINDOW, default 23h). A payout whose
	// first attempt is older is looked up before it is sent again.
	IdempotencyWindow time.Duration
	// SettleWindow is how long after sending a request whose outcome is
	// unknown the PSP may still execute it (PSP_SETTLE_WINDOW, default 2m;
	// it must exceed CallTimeout). Until it has passed, a lookup that finds
	// nothing proves nothing: the payout is looked up again later instead
	// of being sent under a new key or given its hold back.
	SettleWindow time.Duration
	// StripeLivemode is true for a live Stripe key (sk_live_, rk_live_):
	// Stripe outcome events of the other mode are not evidence.
	StripeLivemode bool
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	var errs []error
	if err := c.Backoff.Validate(); err != nil {
		errs = append(errs, config.Within("Backoff", err))
	}
	if c.BreakerDefer <= 0 {
		errs = append(errs, config.Invalid("BreakerDefer", "must be positive"))
	}
	if c.CallTimeout <= 0 {
		errs = append(errs, config.Invalid("CallTimeout", "must be positive"))
	}
	if c.IdempotencyWindow <= 0 {
		errs = append(errs, config.Invalid("IdempotencyWindow", "must be positive"))
	}
	if c.SettleWindow <= c.CallTimeout {
		errs = append(errs, config.Invalid("SettleWindow", "(%s) must exceed %s (%s): a request we stopped "+
			"waiting for may still be executing at the PSP", c.SettleWindow, config.Ref("CallTimeout"), c.CallTimeout))
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
	letters *dlq.Writer
}

// Deps is what a Processor works with, next to the logger, clock and
// registry (its metrics are registered there) every component gets.
type Deps struct {
	lifecycle.Deps
	Pool   *pgxpool.Pool
	Ledger *ledger.Ledger
	PSPs   psp.Registry
	Locks  *walletlock.Locker
	// Letters writes the dead letters of payouts that failed or need review.
	Letters *dlq.Writer
}

// New returns a Processor and registers its metrics on deps.Registerer.
func New(cfg Config, deps Deps) (*Processor, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	common := deps.WithDefaults()
	if plantedLateFirstAttempt() {
		common.Logger.Warn("chaos build: planted defect on; creates are recorded only after their answer, "+
			"so a resume past the PSP's idempotency window can pay twice", "env", envPlantLateFirstAttempt)
	}
	return &Processor{pool: deps.Pool, ledger: deps.Ledger, psps: deps.PSPs, locks: deps.Locks, cfg: cfg,
		logger: common.Logger, now: common.Clock, metrics: newMetrics(common.Registerer), letters: deps.Letters}, nil
}

func (p *Payout) ledgerPayout() ledger.Payout {
	return ledger.Payout{ID: p.ID.String(), UserID: p.UserID, Provider: p.Provider, Amount: p.Amount, Currency: p.Currency}
}

// Process handles one payout command from aegis.transactions.
func (pr *Processor) Process(ctx context.Context, m inbox.Message) error {
	var cmd event.PayoutRequested
	if err := json.Unmarshal(m.Value, &cmd); err != nil {
		return errclass.AsPoison(fmt.Errorf("payout command is not decodable: %w", err))
	}
	if cmd.PayoutID == "" || cmd.UserID == "" {
		return errclass.AsPoison(errors.New("payout command is not decodable: no payout_id or user_id"))
	}
	if err := pr.ledger.Prepare(ctx, cmd.Provider, cmd.Currency); err != nil {
		return err
	}
	lock, err := pr.locks.Acquire(ctx, cmd.UserID)
	if errors.Is(err, walletlock.ErrBusy) {
		return pr.deferBusy(ctx, m, cmd)
	}
	if err != nil {
		return err
	}
	defer lock.Release()
	ctx = lock.Context() //nolint:contextcheck // derived from ctx (cancelled also when the lock is lost)

	// 1. Hold the money and mark the payout as being sent; when the attempt
	// sends without a lookup first, its create is recorded here too
	// (createAhead), so the create is on disk before it is on the wire at
	// the cost of no commit of its own.
	var po *Payout
	var ahead *sendingCreate
	call, wasReview := false, false
	err = database.InTx(ctx, pr.pool, func(tx pgx.Tx) error {
		var done bool
		if po, done, err = loadUnprocessed(ctx, tx, m, cmd.PayoutID); err != nil || done {
			return err
		}
		switch po.Status {
		case Initialized:
			err := pr.ledger.Hold(ctx, tx, po.ledgerPayout())
			if errors.Is(err, ledger.ErrInsufficientFunds) {
				// A business refusal, not a failure to fix: the payout ends
				// here, visible on the payout and in its outcome event.
				reason := "insufficient funds in the wallet"
				switch {
				case errors.Is(err, ledger.ErrWalletOwes):
					reason = "wallet blocked: " + err.Error() + "; it is repaid from the next credits"
				case errors.Is(err, ledger.ErrNotYetAvailable):
					reason = err.Error()
				}
				return inbox.Once(ctx, tx, m, func() error {
					if _, err := move(ctx, tx, po,
						step{to: Failed, err: reason, class: string(errclass.Permanent)},
						step{to: Finalized}); err != nil {
						return err
					}
					return pr.outcome(ctx, tx, po, reason)
				})
			}
			if err != nil && !errors.Is(err, ledger.ErrAlreadyPosted) {
				return err
			}
			call = true
			ahead = pr.createAhead(po, false)
			_, err = moveSending(ctx, tx, po, ahead, step{to: Sending})
			return err
		case Retrying, NeedsReview:
			// NEEDS_REVIEW only gets a command when an operator replays its
			// dead letter: the attempt looks the payout up at the PSP first,
			// adopts what it finds and sends again (under a new key) only
			// when the PSP confirms there is nothing.
			if po.Status == NeedsReview && !event.IsReplayID(m.ID()) {
				// Not an operator's replay: a copy of an older command (a
				// deferred or re-published one) that came after the payout
				// was parked. The payout waits for a person, who was told
				// once by its dead letter; acting on the copy would send
				// again and park it again with a second letter.
				pr.logger.InfoContext(ctx, "command for a payout in NEEDS_REVIEW ignored: only an operator's replay resumes it",
					"payout_id", po.ID, "message_id", m.ID())
				return inbox.Once(ctx, tx, m, nil)
			}
			if po.Status == NeedsReview {
				released, err := ledger.Posted(ctx, tx, ledger.KindPayoutRelease, po.ID.String())
				if err != nil {
					return err
				}
				if released {
					// Paid after its hold was given back: there is nothing
					// to send and no hold to settle. A person must recover
					// the money.
					return inbox.Once(ctx, tx, m, func() error {
						return pr.deadLetter(ctx, tx, m, errors.New("payout in NEEDS_REVIEW after its hold was released: "+
							"nothing to send; recover the money by hand"), errclass.Permanent, po)
					})
				}
			}
			call, wasReview = true, po.Status == NeedsReview
			ahead = pr.createAhead(po, wasReview)
			_, err := moveSending(ctx, tx, po, ahead, step{to: Sending})
			return err
		case Sending:
			// A previous delivery stopped before (or during, or after) its
			// PSP call without recording the answer. A create recorded as
			// sent (sending_at) may have executed: its outcome is unknown
			// from its send time. Within the idempotency window the same
			// key gets the PSP's answer back; past it the payout is looked
			// up first (needsLookup).
			call = true
			resumed, err := pr.resumeUnknown(ctx, tx, po)
			if err != nil {
				return err
			}
			ahead = pr.createAhead(po, false)
			if !resumed && ahead == nil {
				return nil
			}
			_, err = moveSending(ctx, tx, po, ahead)
			return err
		default:
			// Already sent or finished: a stale or duplicate command.
			return inbox.Once(ctx, tx, m, nil)
		}
	})
	if err != nil || !call {
		return pr.unknownPayout(ctx, m, err)
	}

	// 2. Call the PSP.
	client, err := pr.psps.Get(po.Provider)
	var a attemptResult
	if err == nil {
		lookupFirst := ahead == nil && pr.needsLookup(po, wasReview)
		if a, err = pr.attempt(ctx, client, po, lookupFirst, wasReview, ahead); err != nil {
			// Nothing was sent: the redelivery resumes from SENDING_TO_GATEWAY.
			return err
		}
	} else {
		a.err, a.created = errclass.AsPermanent(err), false
	}
	if ctx.Err() != nil {
		// Shutting down or the wallet lock is lost: record nothing; the
		// redelivered message resumes from SENDING_TO_GATEWAY.
		return fmt.Errorf("payout %s interrupted after its PSP call: %w", po.ID, context.Cause(ctx))
	}
	pr.metrics.calls.WithLabelValues(po.Provider, string(resultClass(a.err))).Inc()

	// 3. Record what the PSP said.
	return database.InTx(ctx, pr.pool, func(tx pgx.Tx) error {
		// m is claimed with the load (loadAnswered): it holds with
		// whatever this transaction commits.
		cur, rest, err2 := loadAnswered(ctx, tx, m, po.ID, a.requests)
		if err2 != nil {
			return err2
		}
		if err := recordRequests(ctx, tx, cur, rest); err != nil {
			return err
		}
		if cur.Status != Sending {
			// A webhook settled it while we were calling.
			return nil
		}
		if a.notSending {
			return fmt.Errorf("payout %s: back in SENDING_TO_GATEWAY after it left it; not sent", cur.ID)
		}
		return pr.record(ctx, tx, cur, m, a)
	})
}

// busyDefer is how long a payout command whose wallet is busy waits before
// it is delivered again: about one wallet-lock wait, so that a wallet held
// through a slow PSP call is tried again a few times a call.
const busyDefer = 5 * time.Second

// deferBusy puts a payout command whose wallet another delivery holds
// (a retry of another payout of the user calling the PSP, a resolution)
// back through the outbox, due busyDefer from now, and marks m processed:
// waiting for a wallet is not a failure, and retried in place it would end
// in a dead letter that pages for nothing. The copy keeps m's key (a
// user's first command stays behind the user's earlier credits), payload
// and headers, under a new message id; the payout's state decides what it
// does when it comes back, as for any command. A wallet held for ever is
// not possible (the lock expires with its holder: WALLET_LOCK_EXPIRY), and
// a payout that stays in a state past its deadline is the sweeper's.
func (pr *Processor) deferBusy(ctx context.Context, m inbox.Message, cmd event.PayoutRequested) error {
	now := pr.now()
	headers := make(map[string]string, len(m.Headers)+1)
	for k, v := range m.Headers {
		headers[k] = v
	}
	headers[kafkax.HeaderMessageID] = event.BusyDeferID(m.ID(), now.UnixNano())
	headers[kafkax.HeaderEventType] = string(event.TypePayoutRequested)
	err := inbox.InTx(ctx, pr.pool, m, func(tx pgx.Tx) error {
		_, err := outbox.Insert(ctx, tx, outbox.Message{Topic: m.Topic, EventType: string(event.TypePayoutRequested),
			PartitionKey: string(m.Key), Payload: m.Value, CorrelationID: m.CorrelationID(), NotBefore: now.Add(busyDefer),
			Headers: headers})
		return err
	})
	if err != nil {
		return fmt.Errorf("defer payout %s while its wallet is busy: %w", cmd.PayoutID, err)
	}
	pr.metrics.retries.WithLabelValues(cmd.Provider, classWalletBusy).Inc()
	pr.logger.InfoContext(ctx, "payout command deferred: its wallet is busy", "payout_id", cmd.PayoutID,
		"next_attempt_at", now.Add(busyDefer).UTC())
	return nil
}

// classWalletBusy is the retry metric's class of a command deferred
// because its wallet was busy.
const classWalletBusy = "wallet_busy"

// unknownPayout turns "no such payout" into a dead letter: an operator must
// look at a command for a payout that does not exist.
func (pr *Processor) unknownPayout(ctx context.Context, m inbox.Message, err error) error {
	if !errors.Is(err, ErrUnknownPayout) {
		return err
	}
	return inbox.InTx(ctx, pr.pool, m, func(tx pgx.Tx) error {
		return pr.deadLetter(ctx, tx, m, err, errclass.Permanent, nil)
	})
}

// record applies what an attempt learned (a) to a payout in
// SENDING_TO_GATEWAY.
func (pr *Processor) record(ctx context.Context, tx pgx.Tx, p *Payout, m inbox.Message, a attemptResult) error {
	callErr := a.err
	class := errclass.Of(callErr)
	now := pr.now()
	unknownBefore := p.OutcomeUnknown
	a.learn(p, now)
	switch {
	case a.unsettled:
		// The PSP has no object for the payout yet, but a request whose
		// outcome we did not learn may still be executing there: nothing
		// is sent and nothing given back until it has had time to finish.
		// A refused create (after which the absence was to release the
		// hold) was an attempt; the lookup alone is not.
		if a.created {
			p.Attempts++
		}
		p.LookupNeeded = true
		at := pr.settleAt(p)
		cause := fmt.Errorf("the PSP has no object for the payout yet, but the request sent at %s whose outcome is "+
			"unknown may still be executing there; looked up again from %s", p.LastUnknownAt.UTC().Format(time.RFC3339Nano),
			at.UTC().Format(time.RFC3339Nano))
		if callErr != nil {
			// callErr is context for the reader only: the retry's class
			// and identity are cause's, so it is not wrapped.
			cause = fmt.Errorf("%w (this attempt: %v)", cause, callErr) //nolint:errorlint // see above
		}
		return pr.retry(ctx, tx, p, cause, ClassSettling, at)

	case callErr == nil && a.res.PayoutMissing:
		// The transfer is made and its connected payout was not sent (the
		// attempt stopped between them): the next attempt sends it.
		p.LookupNeeded = true
		return pr.retry(ctx, tx, p, fmt.Errorf("transfer %s made; the connected account's payout is not sent yet",
			a.res.Transfer), errclass.Transient, now)

	case callErr == nil && a.adopted && (a.res.Amount != 0 && a.res.Amount != p.Amount ||
		a.res.Currency != "" && !strings.EqualFold(a.res.Currency, p.Currency)):
		// The PSP's object for this payout is not what we asked for: a
		// person must look.
		msg := fmt.Sprintf("the PSP's object %s for this payout is %d %s, not %d %s", a.res.Reference,
			a.res.Amount, a.res.Currency, p.Amount, p.Currency)
		return pr.needsReview(ctx, tx, p, m, msg, errclass.Permanent)

	case callErr == nil && a.res.Attention != "":
		// The PSP's object waits for a person (a Paystack transfer that
		// needs an OTP) or has a status the PSP does not document: neither
		// paid nor failed. The hold is kept and a person is asked once
		// (NEEDS_REVIEW, a dead letter of this class). The sweeper does
		// not look at NEEDS_REVIEW payouts, so it does not page again; a
		// matching outcome event (the OTP entered, the transfer paid)
		// still settles it, and a replay looks it up again.
		if !a.adopted {
			p.Attempts++
		}
		p.PSPReference, p.PSPStatus = a.res.Reference, a.res.Status
		return pr.needsReview(ctx, tx, p, m, attentionMessage(p, a.res), errclass.Class(a.res.Attention))

	case callErr == nil && a.adopted && a.res.Failed:
		// The PSP itself says its object for the payout failed.
		p.PSPReference, p.PSPStatus = a.res.Reference, a.res.Status
		return pr.fail(ctx, tx, p, m, fmt.Sprintf("the PSP's object %s for this payout is %s", a.res.Reference, a.res.Status),
			errclass.Permanent)

	case callErr == nil:
		if !a.adopted {
			p.Attempts++
		}
		p.PSPReference, p.PSPStatus = a.res.Reference, a.res.Status
		detail := map[string]any{"psp_reference": a.res.Reference, "psp_status": a.res.Status}
		if a.adopted {
			detail["adopted"] = true
		}
		steps := []step{{to: Sent, detail: detail}}
		if a.res.Final {
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
		pr.logger.InfoContext(ctx, "payout sent to PSP", "payout_id", p.ID, "psp_reference", a.res.Reference,
			"status", p.Status, "adopted", a.adopted)
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
			return pr.needsReview(ctx, tx, p, m,
				"retries exhausted; the PSP may have executed the last attempt: "+callErr.Error(), class)
		}
		if unknownBefore && !a.confirmedAbsent {
			return pr.needsReview(ctx, tx, p, m, "retries exhausted after an attempt whose outcome is unknown, "+
				"and the PSP did not confirm it has no payout: "+callErr.Error(), class)
		}
		return pr.failOrHold(ctx, tx, p, m, "retries exhausted: "+callErr.Error(), class)

	default: // permanent: the PSP refused this attempt
		p.Attempts++
		if unknownBefore && !a.confirmedAbsent {
			// An earlier attempt may have paid: a refusal now proves nothing
			// about it. Keep the hold.
			return pr.needsReview(ctx, tx, p, m, "refused after an attempt whose outcome is unknown, "+
				"and the PSP did not confirm it has no payout: "+callErr.Error(), errclass.Permanent)
		}
		return pr.failOrHold(ctx, tx, p, m, callErr.Error(), errclass.Permanent)
	}
}

// failOrHold is fail for a payout none of whose money left our PSP
// balance. Once its transfer to a connected account is made, the money is
// in that account's balance whatever became of its payout: the hold is
// kept and a person asked (NEEDS_REVIEW, class connected_payout_failed);
// reversing the transfer gives the money back (its transfer.reversed).
func (pr *Processor) failOrHold(ctx context.Context, tx pgx.Tx, p *Payout, m inbox.Message, reason string, class errclass.Class) error {
	if p.PSPTransfer == "" {
		return pr.fail(ctx, tx, p, m, reason, class)
	}
	return pr.needsReview(ctx, tx, p, m, connectedPayoutMessage(p, reason), errclass.Class(psp.AttentionConnectedPayout))
}

// connectedPayoutMessage says what a person must do about a payout whose
// transfer reached the connected account and whose payout there did not
// happen.
func connectedPayoutMessage(p *Payout, reason string) string {
	return fmt.Sprintf("%s: transfer %s moved payout %s's money to connected account %s, but its payout to %s did not "+
		"happen (%s). The money is in the connected account's Stripe balance, not ours; the hold is kept. Reverse the "+
		"transfer at Stripe to give it back (its transfer.reversed returns it to the wallet), or pay it out from the "+
		"connected account and resolve the payout as paid", psp.AttentionConnectedPayout, p.PSPTransfer, p.ID,
		p.Destination, p.ExternalAccount, reason)
}

// attentionMessage says what a person must do about a PSP object that
// waits for something other than the PSP.
func attentionMessage(p *Payout, res psp.Result) string {
	if res.Attention == psp.AttentionConnectedPayout {
		return connectedPayoutMessage(p, fmt.Sprintf("the connected account's payout %s is %s", res.Reference, res.Status))
	}
	if res.Attention == psp.AttentionOTP {
		return fmt.Sprintf("%s: %s transfer %s for payout %s waits for an OTP that only a person can give "+
			"(Paystack abandons it after 30 minutes without one); the hold is kept. Enter the OTP (or disable OTP for "+
			"transfers: docs/guides/paystack-otp.md), then replay the dead letter; a paid transfer's event also settles it",
			res.Attention, p.Provider, res.Reference, p.ID)
	}
	return fmt.Sprintf("%s: %s object %s for payout %s has status %q, which the PSP does not document; "+
		"neither paid nor failed, the hold is kept until a person checks it at the PSP", res.Attention, p.Provider,
		res.Reference, p.ID, res.Status)
}

// needsReview parks a payout that may have been paid: the hold is kept, a
// person is asked (dead letter, alert), and an operator's replay looks the
// payout up at the PSP.
func (pr *Processor) needsReview(ctx context.Context, tx pgx.Tx, p *Payout, m inbox.Message, msg string, class errclass.Class) error {
	if _, err := move(ctx, tx, p, step{to: NeedsReview, err: msg, class: string(class)}); err != nil {
		return err
	}
	if err := pr.outcome(ctx, tx, p, msg); err != nil {
		return err
	}
	return pr.deadLetter(ctx, tx, m, errors.New(msg), class, p)
}

// fail ends a payout that certainly was not paid: FAILED, the hold released
// (once: the release is unique per payout), FINALIZED, a dead letter and the
// outcome event.
func (pr *Processor) fail(ctx context.Context, tx pgx.Tx, p *Payout, m inbox.Message, reason string, class errclass.Class) error {
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
	if err := pr.publishCommand(ctx, tx, p, event.PayoutRetryID(p.ID.String(), tid), at, false); err != nil {
		return err
	}
	pr.metrics.retries.WithLabelValues(p.Provider, string(class)).Inc()
	pr.logger.WarnContext(ctx, "payout attempt failed; retry scheduled", "payout_id", p.ID, "attempts", p.Attempts,
		"error_class", string(class), "next_attempt_at", at.UTC(), "error", cause.Error())
	return nil
}

// publishCommand writes the payout's command (a retry, or the sweeper's
// re-publication of a lost one) through the outbox in tx, under message id
// messageID, not to be published before at. firstAttempt is set for a
// command that has not taken the hold yet (an INITIALIZED payout's).
func (pr *Processor) publishCommand(ctx context.Context, tx pgx.Tx, p *Payout, messageID string, at time.Time, firstAttempt bool) error {
	cmd, err := json.Marshal(event.PayoutRequested{PayoutID: p.ID.String(), UserID: p.UserID, Amount: p.Amount,
		Currency: p.Currency, Provider: p.Provider, Attempt: p.Attempts})
	if err != nil {
		return fmt.Errorf("encode payout command: %w", err)
	}
	corr := p.CorrelationID
	headers := map[string]string{
		kafkax.HeaderCorrelationID: corr,
		kafkax.HeaderEventType:     string(event.TypePayoutRequested),
		kafkax.HeaderMessageID:     messageID,
	}
	// A command that will take the hold is the payout's first attempt: it
	// stays on the user's key, behind the user's earlier credits, as
	// webhook-api wrote the original (order.go: a payout accepted after a
	// credit must find it in the wallet). Any later attempt is keyed by the
	// payout, not the user: a row not yet due holds back every later row of
	// its key (outbox), and the user's credits and new payouts must not wait
	// for this one's backoff (order.go says why nothing needs them ordered; a
	// re-published command is handled by the payout's state, like any
	// duplicate). Its dead letter is still filed under the user.
	key := p.UserID
	if !firstAttempt {
		key = RetryKey(p.ID.String())
		headers[kafkax.HeaderUserKey] = p.UserID
	}
	_, err = outbox.Insert(ctx, tx, outbox.Message{
		Topic: kafkax.TopicTransactions, EventType: string(event.TypePayoutRequested), PartitionKey: key,
		Payload: cmd, CorrelationID: corr, NotBefore: at, Headers: headers,
	})
	return err
}

// deadLetter writes the message's dead letter through the outbox in tx,
// with the payout's attempt history; the dead-letter writer counts and logs
// it, and dlq-admin pages once it stores it (alert.DeadLetterKey).
func (pr *Processor) deadLetter(ctx context.Context, tx pgx.Tx, m inbox.Message, cause error, class errclass.Class, p *Payout) error {
	f := dlq.Failure{Err: cause, Class: class}
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
	return pr.letters.Stage(ctx, tx, m.Letter().WithFailure(f, pr.now()))
}

// outcome publishes the payout's outcome on aegis.settlements, typed by
// its status (settlement.go).
func (pr *Processor) outcome(ctx context.Context, tx pgx.Tx, p *Payout, reason string) error {
	return pr.publishOutcome(ctx, tx, p, outcomeType(p.Status), p.Amount, reason)
}

func resultClass(err error) errclass.Class {
	if err == nil {
		return "ok"
	}
	return errclass.Of(err)
}

// Metrics are the payout metrics.
type Metrics struct {
	calls    *prometheus.CounterVec
	retries  *prometheus.CounterVec
	finished *prometheus.CounterVec
	swept    *prometheus.CounterVec
	// deadlines: what the sweeper did past a deadline (the age gauges:
	// ages.go).
	deadlines *deadlineMetrics
}

// newMetrics registers them on reg.
func newMetrics(reg prometheus.Registerer) *Metrics {
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
		swept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_payout_sweep_lookups_total",
			Help: "Payouts waiting at the PSP past PAYOUT_CHECK_AFTER that the sweeper looked up, by what it found.",
		}, []string{"result"}),
	}
	reg.MustRegister(m.calls, m.retries, m.finished, m.swept)
	m.deadlines = newDeadlineMetrics(reg)
	return m
}
