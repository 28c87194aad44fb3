package payout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout/sqlcdb"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/psp"
)

// SweepConfig tunes the sweeper: how a payout whose outcome webhook never
// comes is finished from the PSP's own record.
type SweepConfig struct {
	// After is how long a payout may sit at the PSP (SENT_TO_GATEWAY or
	// AWAITING_RESPONSE) since its last step, and since its last lookup,
	// before it is looked up.
	After time.Duration
	// Every is how often the sweeper looks for such payouts.
	Every time.Duration
	// Batch bounds the payouts looked up in one sweep (oldest first), and
	// those handled per state past its deadline.
	Batch int
	// Deadlines is each unfinished state's longest wait (deadline.go).
	Deadlines Deadlines
}

// ClassPSPMissing is the class of a payout the PSP had accepted and now
// says it has no object for: a contradiction a person must look at.
const ClassPSPMissing errclass.Class = "psp_missing"

// Sweep outcomes, one per payout looked up (the sweep metric's label).
const (
	SweptPaid      = "paid"
	SweptFailed    = "failed"
	SweptPending   = "pending"
	SweptReview    = "needs_review"
	SweptUnknown   = "lookup_failed"
	SweptMovedOn   = "moved_on"
	sweepLockLabel = "aegis:payout-sweeper"
)

// Sweep looks up, at the PSP, every payout that has waited at the PSP
// longer than cfg.After without a step or a lookup, and moves it on from
// what the PSP's own record says: paid → SUCCEEDED (the hold settled),
// failed or canceled → FAILED → FINALIZED (the hold released), still
// pending → looked up again after cfg.After. Nothing is decided on a
// guess: a lookup that fails changes nothing, and an object that does not
// match the payout, or a PSP that no longer knows a payout it accepted,
// sends the payout to NEEDS_REVIEW with its hold kept and an alert.
//
// One sweeper runs at a time across replicas (a session advisory lock); a
// replica that does not get it skips the round. The PSP is called outside
// any transaction; the decision is taken in one transaction that locks the
// payout and first checks it is still waiting (an outcome webhook that
// arrived meanwhile wins, and the lookup is only recorded).
func (pr *Processor) Sweep(ctx context.Context, cfg SweepConfig) (map[string]int, error) {
	conn, err := pr.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("sweep: acquire connection: %w", err)
	}
	defer conn.Release()
	q := sqlcdb.New(conn)
	got, err := q.SweepLock(ctx, sweepLockLabel)
	if err != nil {
		return nil, fmt.Errorf("sweep: take the sweeper lock: %w", err)
	}
	if !got {
		return nil, nil
	}
	defer func() {
		// A lock left behind by a failed unlock goes with the connection.
		if err := q.SweepUnlock(context.WithoutCancel(ctx), sweepLockLabel); err != nil {
			conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()

	now := pr.now()
	ids, err := q.SweepCandidates(ctx, sqlcdb.SweepCandidatesParams{Since: now.Add(-cfg.After),
		EscalateBefore: now.Add(-cfg.Deadlines.Pending), Max: cfg.Batch})
	if err != nil {
		return nil, fmt.Errorf("sweep: find waiting payouts: %w", err)
	}
	done := map[string]int{}
	for _, id := range ids {
		if ctx.Err() != nil {
			break
		}
		verdict, err := pr.check(ctx, id, cfg.Deadlines.Pending)
		if err != nil {
			// One payout that cannot be checked does not stop the others.
			pr.logger.WarnContext(ctx, "payout sweep: check failed", "payout_id", id, "error", err)
			verdict = SweptUnknown
		}
		done[verdict]++
		pr.metrics.swept.WithLabelValues(verdict).Inc()
		if verdict == DeadlineEscalated {
			pr.metrics.deadlines.actions.WithLabelValues(string(Awaiting), DeadlineEscalated).Inc()
		}
	}
	if err := pr.sweepDeadlines(ctx, q, cfg, done); err != nil {
		return done, err
	}
	for k, n := range done {
		if n == 0 {
			delete(done, k)
		}
	}
	return done, nil
}

// RunSweeper sweeps every cfg.Every until ctx ends.
func (pr *Processor) RunSweeper(ctx context.Context, cfg SweepConfig) {
	t := time.NewTicker(cfg.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		done, err := pr.Sweep(ctx, cfg)
		if err != nil && ctx.Err() == nil {
			pr.logger.WarnContext(ctx, "payout sweep failed", "error", err)
		}
		if len(done) > 0 {
			pr.logger.InfoContext(ctx, "payout sweep", "looked_up", done)
		}
	}
}

// check looks one waiting payout up and applies what the PSP says; a
// payout still pending there after escalateAfter in its state goes to
// NEEDS_REVIEW.
func (pr *Processor) check(ctx context.Context, id uuid.UUID, escalateAfter time.Duration) (string, error) {
	var p *Payout
	if err := database.InTx(ctx, pr.pool, func(tx pgx.Tx) (err error) {
		p, err = load(ctx, tx, id.String())
		return err
	}); err != nil {
		return "", err
	}
	if p.Status != Sent && p.Status != Awaiting {
		return SweptMovedOn, nil
	}
	client, err := pr.psps.Get(p.Provider)
	if err != nil {
		return "", err
	}
	callCtx, cancel := context.WithTimeout(ctx, pr.cfg.CallTimeout)
	res, lookupErr := client.FindPayout(callCtx, p.lookup())
	cancel()
	at := pr.now()

	var verdict string
	err = database.InTx(ctx, pr.pool, func(tx pgx.Tx) error {
		p, err := load(ctx, tx, id.String())
		if err != nil {
			return err
		}
		req := pspRequest{kind: "lookup", outcome: "found", ref: res.Reference, at: at}
		switch {
		case errors.Is(lookupErr, psp.ErrNotFound):
			req.outcome, req.ref = "not_found", ""
		case lookupErr != nil:
			req.outcome, req.ref, req.err = "unknown", "", lookupErr.Error()
		}
		if err := recordRequests(ctx, tx, p, []pspRequest{req}); err != nil {
			return err
		}
		if p.Status != Sent && p.Status != Awaiting {
			verdict = SweptMovedOn // an outcome event got there first
			return nil
		}
		ev := evidence{provider: p.Provider, eventID: "lookup:" + at.UTC().Format(time.RFC3339Nano), eventType: "lookup",
			amount: res.Amount, currency: res.Currency, reference: res.Reference}
		switch {
		case lookupErr != nil && !errors.Is(lookupErr, psp.ErrNotFound):
			verdict = SweptUnknown // looked up again next time; nothing is decided on a failed lookup
			return nil
		case lookupErr != nil:
			verdict = SweptReview
			ev.verdict, ev.reason = verdictRecorded, "the PSP has no object for the payout"
			if err := recordEvidence(ctx, tx, p, ev); err != nil {
				return err
			}
			return pr.sweptToReview(ctx, tx, p, fmt.Sprintf("%s: the PSP accepted payout %s but a lookup finds no object for it; "+
				"the hold is kept until a person resolves it", ClassPSPMissing, p.ID), ClassPSPMissing)
		}
		if res.PayoutMissing {
			// Accepted as a connected account's payout, which the account
			// no longer lists: the money is there, and nothing is known.
			verdict = SweptReview
			ev.verdict, ev.reason = verdictRecorded, "the connected account has no payout for the transfer"
			if err := recordEvidence(ctx, tx, p, ev); err != nil {
				return err
			}
			return pr.sweptToReview(ctx, tx, p, fmt.Sprintf("%s: the PSP accepted payout %s but its connected account %s "+
				"lists no payout for transfer %s; the hold is kept until a person resolves it", ClassPSPMissing, p.ID,
				p.Destination, res.Transfer), ClassPSPMissing)
		}
		if why := lookupMismatch(p, res); why != "" {
			verdict = SweptReview
			ev.verdict, ev.reason = verdictMismatch, why
			if err := recordEvidence(ctx, tx, p, ev); err != nil {
				return err
			}
			return pr.sweptToReview(ctx, tx, p, fmt.Sprintf("%s: the PSP's object for payout %s does not match it: %s",
				ClassOutcomeMismatch, p.ID, why), ClassOutcomeMismatch)
		}
		if res.Attention != "" {
			// Waiting for a person at the PSP (a Paystack OTP) or a status
			// the PSP does not document: not settled on; one page.
			verdict = SweptReview
			ev.verdict, ev.reason = verdictRecorded, string(res.Attention)
			if err := recordEvidence(ctx, tx, p, ev); err != nil {
				return err
			}
			p.PSPStatus = res.Status
			return pr.sweptToReview(ctx, tx, p, attentionMessage(p, res), errclass.Class(res.Attention))
		}
		if p.PSPReference == "" {
			p.PSPReference = res.Reference
		}
		if res.Status != "" {
			p.PSPStatus = res.Status
		}
		if res.Final || res.Failed {
			// The PSP's record as of the lookup: an outcome event dated
			// before it is older news (Finalize ignores it as stale), such
			// as the payout.failed of an earlier try arriving after the
			// payout.paid we never got.
			p.PSPUpdatedAt = &at
		}
		detail := map[string]any{"lookup": res.Status, "psp_reference": res.Reference}
		switch {
		case res.Failed:
			verdict = SweptFailed
			ev.verdict = verdictApplied
			if err := recordEvidence(ctx, tx, p, ev); err != nil {
				return err
			}
			pr.logger.WarnContext(ctx, "payout failed at the PSP, learnt by lookup; hold released", "payout_id", p.ID,
				"psp_status", res.Status)
			return pr.failedAtPSP(ctx, tx, p, fmt.Sprintf("%s lookup: %s", p.Provider, res.Status), detail)
		case res.Final:
			verdict = SweptPaid
			ev.verdict = verdictApplied
			if err := recordEvidence(ctx, tx, p, ev); err != nil {
				return err
			}
			pr.logger.InfoContext(ctx, "payout paid at the PSP, learnt by lookup", "payout_id", p.ID, "psp_reference", res.Reference)
			return pr.paid(ctx, tx, p, detail)
		}
		// Still pending at the PSP: recorded (the lookup row restarts the
		// wait), and a payout still SENT is now known to be awaited.
		verdict = SweptPending
		ev.verdict = verdictRecorded
		if err := recordEvidence(ctx, tx, p, ev); err != nil {
			return err
		}
		ds, err := sqlcdb.New(tx).DeadlineState(ctx, p.ID)
		if err != nil {
			return fmt.Errorf("load payout %s deadline state: %w", p.ID, err)
		}
		if pending := at.Sub(ds.StatusSince); pending >= escalateAfter {
			// Not looked up for ever: the PSP's documented time to settle
			// has passed (Deadlines.Pending). Nothing moves; a person looks.
			verdict = DeadlineEscalated
			return pr.sweptToReview(ctx, tx, p, fmt.Sprintf("%s: payout %s is still %q at the PSP after %s, past its "+
				"deadline (%s); the hold is kept until a person resolves it", ClassDeadline, p.ID, res.Status,
				pending.Round(time.Second), escalateAfter), ClassDeadline)
		}
		var steps []step
		if p.Status == Sent {
			steps = append(steps, step{to: Awaiting, detail: detail})
		}
		_, err = move(ctx, tx, p, steps...)
		return err
	})
	return verdict, err
}

// sweptToReview parks a payout the sweeper cannot settle on the PSP's
// word: NEEDS_REVIEW with its hold kept, a dead letter and an alert naming
// it.
func (pr *Processor) sweptToReview(ctx context.Context, tx pgx.Tx, p *Payout, msg string, class errclass.Class) error {
	steps := []step{{to: NeedsReview, err: msg, class: string(class)}}
	if p.Status == Sent {
		steps = append([]step{{to: Awaiting}}, steps...)
	}
	if _, err := move(ctx, tx, p, steps...); err != nil {
		return err
	}
	if err := pr.outcome(ctx, tx, p, msg); err != nil {
		return err
	}
	// Its dead letter is the payout's command, as if the worker had
	// consumed it: ops find it with the others, and a replay looks the
	// payout up again (NEEDS_REVIEW replays always do).
	cmd, err := json.Marshal(event.PayoutRequested{PayoutID: p.ID.String(), UserID: p.UserID, Amount: p.Amount,
		Currency: p.Currency, Provider: p.Provider, Attempt: p.Attempts})
	if err != nil {
		return fmt.Errorf("encode payout command: %w", err)
	}
	h, err := history(ctx, tx, p.ID)
	if err != nil {
		return err
	}
	now := pr.now()
	l := dlq.Letter{Source: dlq.SourceSweeper, OriginalTopic: kafkax.TopicTransactions, PartitionKey: p.UserID,
		EventType: string(event.TypePayoutRequested), Payload: cmd, CorrelationID: p.CorrelationID,
		Headers: map[string]string{
			kafkax.HeaderCorrelationID: p.CorrelationID,
			kafkax.HeaderEventType:     string(event.TypePayoutRequested),
			kafkax.HeaderMessageID:     event.PayoutSweepID(p.ID.String(), now.UnixNano()),
		},
		Error: msg, ErrorClass: string(class), RetryCount: p.Attempts, FirstFailureAt: now, FailedAt: now}
	for _, a := range h {
		l.RetryHistory = append(l.RetryHistory, dlq.Attempt{At: a.At, Error: a.Error, Class: a.Class})
	}
	if len(l.RetryHistory) > 0 {
		l.FirstFailureAt = l.RetryHistory[0].At
	}
	if last := len(l.RetryHistory) - 1; last < 0 || l.RetryHistory[last].Error != msg {
		// The history ends with what parked the payout, even when nothing
		// had failed before (a payout past its deadline).
		l.RetryHistory = append(l.RetryHistory, dlq.Attempt{At: now, Error: msg, Class: string(class)})
	}
	pr.logger.ErrorContext(ctx, "payout needs review (sweeper)", "payout_id", p.ID, "error_class", string(class), "error", msg)
	// The letter goes straight into dead_letters, in the transaction that
	// parks the payout, not through the outbox: no record failed, so it has
	// no origin offset, and dlq-admin could not tell a second publish of it
	// (the relay delivers at least once) from a second letter. One page for
	// the stuck payout: dlq-admin's, when its sweep finds the new letter
	// (alert.DeadLetterKey); the sweeper itself does not page. Counted
	// before the commit, as a staged letter is: a rolled back sweep is
	// retried and may count again, but no letter goes uncounted.
	if _, inserted, err := pr.letters.Insert(ctx, tx, l); err != nil {
		return fmt.Errorf("write payout %s dead letter: %w", p.ID, err)
	} else if inserted {
		pr.letters.Written(ctx, l)
	}
	return nil
}

// lookupMismatch says why the object a lookup found is not the payout's,
// or "": amount and currency (when the PSP says) and the PSP's id once we
// know it.
func lookupMismatch(p *Payout, res psp.Result) string {
	var why []string
	if res.Amount != 0 && res.Amount != p.Amount {
		why = append(why, fmt.Sprintf("amount %d, payout's %d", res.Amount, p.Amount))
	}
	if res.Currency != "" && !strings.EqualFold(res.Currency, p.Currency) {
		why = append(why, fmt.Sprintf("currency %q, payout's %q", res.Currency, p.Currency))
	}
	if p.PSPReference != "" && res.Reference != "" && res.Reference != p.PSPReference {
		why = append(why, fmt.Sprintf("PSP reference %q, payout's %q", res.Reference, p.PSPReference))
	}
	return strings.Join(why, "; ")
}
