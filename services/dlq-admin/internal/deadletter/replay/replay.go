package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/telemetry"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/approval"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/audit"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay/sqlcdb"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
)

// Headers added to a replayed message.
const (
	HeaderReplayOf    = "replay_of"
	HeaderReplayCount = "replay_count"
)

// DefaultEventType is the outbox event type of a letter that has none.
const DefaultEventType = "replay"

// ErrNotOpen means the letter was already replayed or discarded.
var ErrNotOpen = store.ErrNotOpen

// ErrNotReplayable means the letter cannot be put back through the outbox
// (its payload is not JSON: a poison message). Nothing was changed.
var ErrNotReplayable = errors.New("dead letter cannot be replayed")

// NotOpenError says what became of a letter that is not open.
type NotOpenError struct {
	ID     int64
	Status string
}

func (e *NotOpenError) Error() string {
	return fmt.Sprintf("dead letter %d is %s, not open", e.ID, e.Status)
}

// Is makes errors.Is(err, ErrNotOpen) true.
func (e *NotOpenError) Is(target error) bool { return target == ErrNotOpen }

// Service resolves dead letters and manages bulk replay jobs.
type Service struct {
	pool   *pgxpool.Pool
	q      *sqlcdb.Queries
	store  *store.Store
	logger *slog.Logger
	now    func() time.Time
	// jobs queues the River job that works a new replay job.
	jobs Enqueuer
	// notifier wakes the relays once a replay's outbox row is committed.
	notifier interface{ Notify() }
	// gate holds bulk replays of more than threshold letters for a second
	// operator (WithApproval); nil holds none.
	gate      *approval.Gate
	threshold int
}

// what is the part of dlq-admin this package's errors are marked with.
const what = "the dead-letter store"

// WithNotifier makes the service wake the relays after each committed
// replay (an outbox.Notifier); without one the relays find replays on their
// next poll.
func (s *Service) WithNotifier(n interface{ Notify() }) *Service {
	s.notifier = n
	return s
}

// WithJobs sets the River client that bulk replay jobs are queued on (the
// worker side is Worker); without one CreateJob refuses.
func (s *Service) WithJobs(e Enqueuer) *Service {
	s.jobs = e
	return s
}

func (s *Service) notify() {
	if s.notifier != nil {
		s.notifier.Notify()
	}
}

// New returns a Service on pool.
func New(pool *pgxpool.Pool, st *store.Store, deps lifecycle.Deps) *Service {
	deps = deps.WithDefaults()
	return &Service{pool: pool, q: sqlcdb.New(pool), store: st, logger: deps.Logger.With("component", "replay"), now: deps.Clock}
}

// Replayed is the result of one replay: what it did (Outcome,
// store.OutcomeRepublished or store.OutcomeNoop), the outbox row of a
// republished letter and the subject state that made a replay a no-op.
type Replayed struct {
	Letter       store.Summary
	Outcome      string
	OutboxID     int64
	SubjectState string
}

// Replay puts letter id back through the pipeline on behalf of actor (the
// token's name), in one transaction. Errors: store.ErrNotFound, ErrNotOpen
// (a *NotOpenError), ErrNotReplayable.
func (s *Service) Replay(ctx context.Context, id int64, actor, reason string) (_ Replayed, err error) {
	defer fault.Mark(&err, what)
	if err := input.CheckReason(reason, ""); err != nil {
		return Replayed{}, err
	}
	var out Replayed
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		out, err = s.replayTx(ctx, tx, id, actor, reason, 0)
		return err
	})
	if err != nil {
		return Replayed{}, err
	}
	if out.Outcome == store.OutcomeRepublished {
		s.notify()
	}
	s.logger.InfoContext(ctx, "dead letter replayed", "dead_letter_id", id, "outcome", out.Outcome,
		"outbox_id", out.OutboxID, "subject_state", out.SubjectState, "topic", out.Letter.OriginalTopic, "actor", actor)
	return out, nil
}

// replayTx replays letter id within tx. It changes nothing before it has
// decided the letter can be replayed, so a caller may keep using tx after
// ErrNotOpen or ErrNotReplayable. jobID is the bulk job doing it, or 0.
func (s *Service) replayTx(ctx context.Context, tx pgx.Tx, id int64, actor, reason string, jobID int64) (Replayed, error) {
	d, err := store.Lock(ctx, tx, id)
	if err != nil {
		return Replayed{}, err
	}
	if d.Status != store.StatusOpen {
		return Replayed{}, &NotOpenError{ID: id, Status: d.Status}
	}
	msg, err := Message(d)
	if err != nil {
		return Replayed{}, err
	}
	ctx, span := replaySpan(ctx, id, msg.Headers)
	defer span.End()
	rp := store.Replay{Outcome: store.OutcomeRepublished}
	if rp.SubjectState, err = noopState(ctx, s.q.WithTx(tx), d); err != nil {
		return Replayed{}, fmt.Errorf("replay dead letter %d: %w", id, err)
	}
	if rp.SubjectState != "" {
		// Publishing it would change nothing (the consumer ignores it):
		// say so, rather than let a republish look like a fix.
		rp.Outcome = store.OutcomeNoop
	} else if rp.OutboxID, err = outbox.Insert(ctx, tx, msg); err != nil {
		return Replayed{}, fmt.Errorf("replay dead letter %d: %w", id, err)
	}
	now := s.now()
	letter, err := store.MarkReplayed(ctx, tx, id, store.Resolution{By: actor, At: now, Reason: reason}, rp)
	if err != nil {
		return Replayed{}, err
	}
	detail := map[string]any{"outcome": rp.Outcome, "replay_count": letter.ReplayCount, "topic": d.OriginalTopic}
	if rp.OutboxID != 0 {
		detail["outbox_id"] = rp.OutboxID
	}
	if rp.SubjectState != "" {
		detail["subject_state"] = rp.SubjectState
	}
	if jobID != 0 {
		detail["replay_job_id"] = jobID
	}
	err = audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: store.ActionReplay, TargetType: store.TargetDeadLetter,
		TargetID: audit.ID(id), Reason: reason, Detail: detail, At: now})
	if err != nil {
		return Replayed{}, err
	}
	return Replayed{Letter: letter, Outcome: rp.Outcome, OutboxID: rp.OutboxID, SubjectState: rp.SubjectState}, nil
}

// Message is the outbox message that replays d (see the package doc for the
// header rules). It fails with ErrNotReplayable when d cannot go through the
// outbox.
func Message(d store.DeadLetter) (outbox.Message, error) {
	if d.OriginalTopic == "" {
		return outbox.Message{}, fmt.Errorf("%w: it has no original topic to go back to", ErrNotReplayable)
	}
	if !slices.Contains(kafkax.AllTopics(), d.OriginalTopic) {
		// A letter names its topic itself (a header on a .dlq record): a
		// replay must not become a way to publish anywhere.
		return outbox.Message{}, fmt.Errorf("%w: its original topic is not one of Aegis's topics (%s)",
			ErrNotReplayable, strings.Join(kafkax.AllTopics(), ", "))
	}
	if !json.Valid(d.Payload) {
		return outbox.Message{}, fmt.Errorf("%w: its payload is not JSON (a poison message); fix the producer, then discard it", ErrNotReplayable)
	}
	headers := map[string]string{}
	if len(d.Headers) > 0 {
		if err := json.Unmarshal(d.Headers, &headers); err != nil {
			return outbox.Message{}, fmt.Errorf("%w: its stored headers are not an object of strings", ErrNotReplayable)
		}
	}
	if headers == nil {
		headers = map[string]string{}
	}
	if headers[dlq.HeaderPayloadFormat] == dlq.PayloadPSPWebhook {
		return outbox.Message{}, fmt.Errorf("%w: it is a PSP webhook as received, which could not be stored as sent "+
			"(see its error); it cannot be published as it is: settle the payment with the PSP's record, then discard it",
			ErrNotReplayable)
	}
	count := d.ReplayCount + 1
	headers[HeaderReplayOf] = audit.ID(d.ID)
	headers[HeaderReplayCount] = strconv.Itoa(count)
	if d.Source == dlq.SourceConsumer || d.Source == dlq.SourceSweeper {
		orig := headers[kafkax.HeaderMessageID]
		if orig == "" {
			orig = "dl-" + audit.ID(d.ID)
		}
		headers[kafkax.HeaderMessageID] = event.ReplayID(orig, d.ID, count)
	}
	eventType := d.EventType
	if eventType == "" {
		eventType = DefaultEventType
	}
	return outbox.Message{
		Topic: d.OriginalTopic, EventType: eventType, PartitionKey: d.PartitionKey,
		Payload: d.Payload, Headers: headers, CorrelationID: d.CorrelationID,
	}, nil
}

// replaySpan starts the span of a replay in the trace of the message that
// failed (the traceparent stored with the letter), linked to the operator's
// request or the bulk job that asked for it: the republished row carries it
// on (outbox.Insert), so the consumer's second try joins the payment's
// trace. Without a stored trace it is a child of ctx's span.
func replaySpan(ctx context.Context, id int64, headers map[string]string) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.Int64("aegis.dead_letter_id", id))}
	parent := ctx
	if stored := telemetry.Extract(ctx, headers); trace.SpanContextFromContext(stored).IsValid() {
		parent = stored
		if caller := trace.SpanContextFromContext(ctx); caller.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: caller}))
		}
	}
	return otel.Tracer("github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay").Start(parent, "dead letter replay", opts...)
}

// Discard closes letter id for good on behalf of actor, with a mandatory
// reason, in one transaction. Errors: a *input.Invalid for the reason,
// store.ErrNotFound, ErrNotOpen, ErrHoldsMoney (its payout still holds
// money: resolve the payout first).
func (s *Service) Discard(ctx context.Context, id int64, actor, reason string) (_ store.Summary, err error) {
	defer fault.Mark(&err, what)
	reason = strings.TrimSpace(reason)
	if err := input.CheckReason(reason, "say why this letter is closed without a replay"); err != nil {
		return store.Summary{}, err
	}
	var out store.Summary
	err = database.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		d, err := store.Lock(ctx, tx, id)
		if err != nil {
			return err
		}
		if d.Status != store.StatusOpen {
			return &NotOpenError{ID: id, Status: d.Status}
		}
		if err := refuseHeld(ctx, s.q.WithTx(tx), []int64{id}); err != nil {
			return err
		}
		now := s.now()
		if out, err = store.MarkDiscarded(ctx, tx, id, store.Resolution{By: actor, At: now, Reason: reason}); err != nil {
			return err
		}
		return audit.Write(ctx, tx, audit.Entry{Actor: actor, Action: store.ActionDiscard, TargetType: store.TargetDeadLetter,
			TargetID: audit.ID(id), Reason: reason, Detail: map[string]any{"topic": d.OriginalTopic, "error_class": d.ErrorClass}, At: now})
	})
	if err != nil {
		return store.Summary{}, err
	}
	s.logger.InfoContext(ctx, "dead letter discarded", "dead_letter_id", id, "actor", actor)
	return out, nil
}
