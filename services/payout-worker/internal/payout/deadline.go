package payout

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout/sqlcdb"
)

// Deadlines is the longest each unfinished payout state may last, counted
// from when the payout entered it (payouts.status_since). Past it the
// sweeper acts (deadline.go, doc.go "Deadlines"); the age alerts
// (aegis_payout_oldest_age_seconds) fire at the same values.
type Deadlines struct {
	// Initialized bounds INITIALIZED (PAYOUT_DEADLINE_INITIALIZED, 30m):
	// the command's way through the outbox, Kafka and the worker, including
	// its in-place retries. Past it the command is taken as lost and
	// published again (once).
	Initialized time.Duration
	// Sending bounds SENDING_TO_GATEWAY (PAYOUT_DEADLINE_SENDING, 15m): one
	// delivery makes at most three PSP calls (a lookup, the create, a lookup
	// after a refusal), each bounded by CallTimeout, and the consumer
	// retries a delivery in place for up to WORKER_RETRY_IN_PLACE_FOR (the
	// last retry may start just before it ends). Past it the delivery is
	// taken as lost: the payout is resumed through a retry that looks it up
	// at the PSP first.
	Sending time.Duration
	// Retrying bounds RETRYING (PAYOUT_DEADLINE_RETRYING, 30m): a retry is
	// due after at most the longest defer we choose (the backoff's cap, the
	// breaker's defer, the settle window), and then needs the relay and the
	// consumer (with its in-place retries). A PSP's Retry-After may ask for
	// longer: such a retry gets the same grace after it is due. Past it the
	// retry command is taken as lost and published again (once).
	Retrying time.Duration
	// Pending bounds SENT_TO_GATEWAY and AWAITING_RESPONSE
	// (PAYOUT_PENDING_ESCALATE_AFTER, 240h): Stripe documents that a payout
	// changes to paid, or to failed or canceled, within 5 business days; ten
	// calendar days cover a weekend and bank holidays. Paystack documents no
	// bound for a pending transfer. Past it a payout still pending at the
	// PSP goes to NEEDS_REVIEW (hold kept, dead letter) instead of being
	// looked up for ever.
	Pending time.Duration
	// Review bounds NEEDS_REVIEW (PAYOUT_REVIEW_DEADLINE, 24h): a person
	// must resolve the payout; past it the payout counts as overdue
	// (aegis_payout_overdue, the age alert). Nothing is moved automatically.
	Review time.Duration
}

// For is status's deadline (0 for a finished state).
func (d Deadlines) For(s Status) time.Duration {
	switch s {
	case Initialized:
		return d.Initialized
	case Sending:
		return d.Sending
	case Retrying:
		return d.Retrying
	case Sent, Awaiting:
		return d.Pending
	case NeedsReview:
		return d.Review
	}
	return 0
}

// unfinished is every state a payout can wait in, for the age gauges.
func unfinished() []Status {
	return []Status{Initialized, Sending, Retrying, Sent, Awaiting, NeedsReview}
}

// callsPerDelivery is the most PSP calls one delivery of a payout command
// makes (attempt.go): a lookup, the create and a lookup after a refusal.
const callsPerDelivery = 3

// autoResumes is how often the sweeper resumes one payout on its own. One
// lost command is an incident the sweeper repairs; a payout that stalls
// again is not a lost message but something a person must see.
const autoResumes = 1

// ClassDeadline is the class of a payout escalated because it outlived
// its state's deadline.
const ClassDeadline errclass.Class = "payout_deadline"

// What the sweeper did with a payout past its deadline (the sweep result's
// and aegis_payout_deadline_escalations_total's action).
const (
	// DeadlineRepublished: its command was published again (INITIALIZED,
	// RETRYING).
	DeadlineRepublished = "republished"
	// DeadlineResumed: a SENDING_TO_GATEWAY payout was moved to RETRYING
	// with a retry that looks it up at the PSP before sending anything.
	DeadlineResumed = "resumed"
	// DeadlineEscalated: moved to NEEDS_REVIEW, hold kept, dead letter.
	DeadlineEscalated = "escalated"
	// DeadlineWaiting: past its deadline after its one automatic resume:
	// left to the age alert (INITIALIZED has no hold to review).
	DeadlineWaiting = "waiting"
	// DeadlineNotDue: RETRYING on a PSP's Retry-After that has not had
	// its grace yet.
	DeadlineNotDue = "not_due"
	// DeadlineBusy: a SENDING_TO_GATEWAY payout whose wallet lock is held
	// (a delivery is at work on it); looked at again next sweep.
	DeadlineBusy = "wallet_busy"
)

// maxDefer is the longest a retry we schedule ourselves waits before it is
// due: the backoff's cap, the breaker's defer or the settle window.
func (c Config) maxDefer() time.Duration {
	return max(c.Backoff.Max, c.BreakerDefer, c.SettleWindow)
}

// Validate reports a sweeper configuration whose deadlines contradict the
// waits they bound (p: the payout settings; inPlace: how long the consumer
// retries a delivery in place). Field names: After, Every, Batch,
// Deadlines.*, and the refs CallTimeout, MaxDefer (p's) and InPlace.
func (c SweepConfig) Validate(p Config, inPlace time.Duration) error {
	var errs []error
	if c.After <= 0 {
		errs = append(errs, config.Invalid("After", "must be positive"))
	}
	if c.Every <= 0 {
		errs = append(errs, config.Invalid("Every", "must be positive"))
	}
	if c.Batch < 1 {
		errs = append(errs, config.Invalid("Batch", "must be at least 1"))
	}
	d := c.Deadlines
	// The command may still be retried in place by the consumer.
	if d.Initialized <= inPlace {
		errs = append(errs, config.Invalid("Deadlines.Initialized", "(%s) must exceed %s (%s): the command may still be "+
			"retried in place", d.Initialized, config.Ref("InPlace"), inPlace))
	}
	if sending := inPlace + 2*callsPerDelivery*p.CallTimeout; d.Sending <= sending {
		errs = append(errs, config.Invalid("Deadlines.Sending", "(%s) must exceed %s plus %d × %s (%s): a delivery "+
			"may still be calling the PSP", d.Sending, config.Ref("InPlace"), 2*callsPerDelivery, config.Ref("CallTimeout"), sending))
	}
	if retrying := p.maxDefer() + inPlace; d.Retrying <= retrying {
		errs = append(errs, config.Invalid("Deadlines.Retrying", "(%s) must exceed the longest scheduled wait "+
			"(%s, %s, %s: %s) plus %s (%s)", d.Retrying, config.Ref("Backoff.Max"), config.Ref("BreakerDefer"),
			config.Ref("SettleWindow"), p.maxDefer(), config.Ref("InPlace"), retrying))
	}
	if d.Pending <= c.After {
		errs = append(errs, config.Invalid("Deadlines.Pending", "(%s) must exceed %s (%s): a pending payout is "+
			"looked up at least once before it is escalated", d.Pending, config.Ref("After"), c.After))
	}
	if d.Review <= 0 {
		errs = append(errs, config.Invalid("Deadlines.Review", "must be positive"))
	}
	return errors.Join(errs...)
}

// deadlineMetrics are the deadline counter; the age gauges are read from
// Postgres at each scrape (ages.go).
type deadlineMetrics struct {
	actions *prometheus.CounterVec
}

func newDeadlineMetrics(reg prometheus.Registerer) *deadlineMetrics {
	m := &deadlineMetrics{
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_payout_deadline_escalations_total",
			Help: "Payouts past their state's deadline that the sweeper acted on, by state and action " +
				"(republished, resumed, escalated: to NEEDS_REVIEW).",
		}, []string{"state", "action"}),
	}
	reg.MustRegister(m.actions)
	return m
}

// sweepDeadlines acts on the payouts past the deadline of INITIALIZED,
// SENDING_TO_GATEWAY and RETRYING (SENT_TO_GATEWAY and AWAITING_RESPONSE
// are escalated by check; NEEDS_REVIEW waits for a person and its alert).
func (pr *Processor) sweepDeadlines(ctx context.Context, q *sqlcdb.Queries, cfg SweepConfig, done map[string]int) error {
	for _, s := range []Status{Initialized, Sending, Retrying} {
		before := pr.now().Add(-cfg.Deadlines.For(s))
		// INITIALIZED has no hold to review: once resumed, it is left to
		// the age alert and not looked at again. The others leave their
		// state when resumed or escalated.
		below := math.MaxInt32
		if s == Initialized {
			below = autoResumes
		}
		ids, err := q.Overdue(ctx, sqlcdb.OverdueParams{Status: string(s), Before: before, ResumesBelow: below, Max: cfg.Batch})
		if err != nil {
			return fmt.Errorf("sweep: find payouts past the %s deadline: %w", s, err)
		}
		for _, id := range ids {
			if ctx.Err() != nil {
				return nil
			}
			action, err := pr.overdue(ctx, cfg, s, id)
			if err != nil {
				// One payout that cannot be handled does not stop the others.
				pr.logger.WarnContext(ctx, "payout deadline: handling failed", "payout_id", id, "status", string(s), "error", err)
				action = SweptUnknown
			}
			done[action]++
			switch action {
			case DeadlineRepublished, DeadlineResumed, DeadlineEscalated:
				pr.metrics.deadlines.actions.WithLabelValues(string(s), action).Inc()
			}
		}
	}
	return nil
}

// overdue acts on one payout found in state want past its deadline.
//
//   - INITIALIZED: no hold was taken and nothing was sent, so publishing
//     the command again cannot pay twice (a duplicate finds the payout
//     moved on: the worker acts on the payout's state, not on the
//     message). Once, on the user's key (it takes the hold: order.go);
//     after that the age alert asks a person.
//   - SENDING_TO_GATEWAY: a delivery may have reached the PSP and its
//     outcome is not recorded. Under the payout's wallet lock (no delivery
//     is at work on it), the payout is marked as having an unknown outcome
//     sent now and moved to RETRYING: its retry looks it up at the PSP
//     first, adopts what exists, and sends again (under a new key) or lets
//     a refusal release the hold only once the PSP confirms it has nothing
//     and the settle window has passed (attempt.go). A second stall goes
//     to NEEDS_REVIEW.
//   - RETRYING: the retry command was lost, discarded or dead-lettered;
//     the payout's flags already say whether its retry must look it up
//     first. Published again once; a second stall goes to NEEDS_REVIEW.
func (pr *Processor) overdue(ctx context.Context, cfg SweepConfig, want Status, id uuid.UUID) (string, error) {
	if want == Sending {
		var user string
		if err := database.InTx(ctx, pr.pool, func(tx pgx.Tx) error {
			p, err := load(ctx, tx, id.String())
			if err == nil {
				user = p.UserID
			}
			return err
		}); err != nil {
			return "", err
		}
		lock, err := pr.locks.Acquire(ctx, user)
		if err != nil {
			// A delivery may be at work on it (or Redis is away): looked at
			// again next sweep; the age alert covers one that stays.
			pr.logger.InfoContext(ctx, "payout deadline: wallet lock not taken; next sweep", "payout_id", id, "error", err)
			return DeadlineBusy, nil //nolint:nilerr // a busy wallet is looked at next sweep
		}
		defer lock.Release()
		ctx = lock.Context() //nolint:contextcheck // derived from ctx (cancelled also when the lock is lost)
	}
	var action string
	err := database.InTx(ctx, pr.pool, func(tx pgx.Tx) error {
		p, err := load(ctx, tx, id.String())
		if err != nil {
			return err
		}
		q := sqlcdb.New(tx)
		ds, err := q.DeadlineState(ctx, p.ID)
		if err != nil {
			return fmt.Errorf("load payout %s deadline state: %w", p.ID, err)
		}
		now := pr.now()
		deadline := cfg.Deadlines.For(want)
		if p.Status != want || now.Sub(ds.StatusSince) < deadline {
			action = SweptMovedOn
			return nil
		}
		since := ds.StatusSince.UTC().Format(time.RFC3339)
		if want == Retrying {
			due, err := q.RetryDue(ctx, p.ID)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("load payout %s retry: %w", p.ID, err)
			}
			if err == nil && now.Before(due.Add(deadline-pr.cfg.maxDefer())) {
				action = DeadlineNotDue
				return nil
			}
		}
		resumed := ds.DeadlineResumes >= autoResumes
		switch {
		case want == Initialized && resumed:
			action = DeadlineWaiting
			return nil
		case want == Initialized:
			action = DeadlineRepublished
			pr.logger.WarnContext(ctx, "payout not taken up by its deadline; command published again", "payout_id", p.ID,
				"status", string(p.Status), "since", since)
			if err := pr.publishCommand(ctx, tx, p, event.PayoutSweepID(p.ID.String(), now.UnixNano()), now, true); err != nil {
				return err
			}
			return q.CountResume(ctx, sqlcdb.CountResumeParams{ID: p.ID, At: &now})
		case want == Sending:
			// A create recorded as sent (sending_at) whose answer never came
			// is an unknown outcome, as a redelivery would find it: its
			// "sending" row becomes "unknown" (resumeUnknown).
			if _, err := pr.resumeUnknown(ctx, tx, p); err != nil {
				return err
			}
			// A delivery's call may have executed at the PSP: from now on
			// an absence counts only after the settle window, and a refusal
			// releases the hold only on a lookup that finds nothing.
			p.OutcomeUnknown, p.LookupNeeded = true, true
			if p.LastUnknownAt == nil || now.After(*p.LastUnknownAt) {
				t := now
				p.LastUnknownAt = &t
			}
		}
		if resumed {
			action = DeadlineEscalated
			return pr.sweptToReview(ctx, tx, p, fmt.Sprintf("%s: payout %s has been %s since %s, past its deadline (%s), "+
				"after the sweeper resumed it once; the hold is kept until a person resolves it", ClassDeadline, p.ID,
				p.Status, since, deadline), ClassDeadline)
		}
		if want == Sending {
			action = DeadlineResumed
			cause := fmt.Errorf("%s: no delivery recorded an outcome since %s (deadline %s); looked up at the PSP "+
				"before anything is sent again", ClassDeadline, since, deadline)
			if err := pr.retry(ctx, tx, p, cause, ClassDeadline, now); err != nil {
				return err
			}
			return q.CountResume(ctx, sqlcdb.CountResumeParams{ID: p.ID, At: &now})
		}
		action = DeadlineRepublished
		pr.logger.WarnContext(ctx, "payout retry not taken up by its deadline; command published again", "payout_id", p.ID,
			"since", since)
		if err := pr.publishCommand(ctx, tx, p, event.PayoutSweepID(p.ID.String(), now.UnixNano()), now, false); err != nil {
			return err
		}
		return q.CountResume(ctx, sqlcdb.CountResumeParams{ID: p.ID, At: &now})
	})
	return action, err
}
