package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest/sqlcdb"
)

// ErrUnstorable means Postgres refused even the dead-letter record of an
// event it could not store as sent. Nothing was stored; it should not
// happen (that record holds only text made storable).
var ErrUnstorable = errors.New("event cannot be stored")

// Outcome of Save.
type Outcome string

const (
	// Accepted: stored and queued for Kafka.
	Accepted Outcome = "accepted"
	// DeadLettered: stored, and in the dead-letter store with the reason.
	DeadLettered Outcome = "dead_lettered"
	// Duplicate: already stored earlier; nothing new was written.
	Duplicate Outcome = "duplicate"
	// Stale: stored and published for the record, but the PSP had already
	// reported something newer about the object; it changes no money.
	Stale Outcome = "stale"
)

// Notifier wakes the relays after a commit (an outbox.Notifier).
type Notifier interface {
	Notify()
	QueueNotify(b *pgx.Batch) bool
}

// Store commits webhook events.
type Store struct {
	pool    *pgxpool.Pool
	now     func() time.Time
	notify  Notifier
	letters *dlq.Writer
	// proof signs each money event's outbox row (eventproof.Header).
	proof *eventproof.Keys
}

// NewStore returns a Store on pool that tells notify after each commit.
func NewStore(pool *pgxpool.Pool, notify Notifier, now func() time.Time) *Store {
	return &Store{pool: pool, notify: notify, now: now}
}

// WithLetters returns the store writing its dead letters through w, which
// counts and logs them once committed (without it they are stored and not
// counted).
func (s *Store) WithLetters(w *dlq.Writer) *Store {
	c := *s
	c.letters = w
	return &c
}

// WithProof returns the store signing every money event it writes to the
// outbox with k, the proof payout-worker requires before it moves money
// (pkg/eventproof). Without it no proof is written and the worker refuses
// the store's money events.
func (s *Store) WithProof(k *eventproof.Keys) *Store {
	c := *s
	c.proof = k
	return &c
}

// Save commits one webhook and its outbox row (or its dead letter) in its own
// transaction. Under load prefer a Committer, which groups them.
func (s *Store) Save(ctx context.Context, p Pending) (Saved, error) {
	r := s.SaveGroup(ctx, []Pending{p})
	return r[0], r[0].Err
}

// Pending is one verified webhook waiting to be committed.
type Pending struct {
	Event         Normalized
	Body          []byte
	CorrelationID string
	// TraceHeaders is the W3C trace context (traceparent, tracestate) of
	// the request that received the webhook, stored with its outbox row.
	TraceHeaders map[string]string
}

// Saved is what became of a Pending.
type Saved struct {
	Outcome Outcome
	// EventID is the id the event is stored under: the PSP's, or a digest
	// of it when the PSP's cannot be stored.
	EventID string
	// Reason says why a DeadLettered event was dead-lettered.
	Reason string
	Err    error
}

// job is a Pending as SaveGroup works on it.
type job struct {
	Pending
	id      *int64
	fresh   int
	owner   string
	key     string
	payload []byte
	headers map[string]string
	out     Outcome
	// letter is the dead letter this job stored in the open transaction.
	letter *dlq.Letter
	// unstorable is set when the event cannot be stored as sent.
	unstorable unstorable
}

// SaveGroup commits several webhooks in one transaction: the hot path of the
// suite. The transaction is pipelined, and on the common path (credits and
// events we do not act on) the whole group is one round trip of four
// statements and one commit however many webhooks it holds; otherwise two
// round trips. Each webhook is still answered only after that commit. If the
// transaction fails, every result carries the error (the caller retries
// them one by one, so one bad body cannot fail its neighbours).
//
// A webhook that cannot be stored as sent (checkStorable, or Postgres
// refusing its data when it is alone in its group) is stored as far as it
// can be and dead-lettered with its body as received: answered, never a 5xx
// the PSP would retry until it gives up on the payment.
func (s *Store) SaveGroup(ctx context.Context, group []Pending) []Saved {
	jobs := newJobs(group)
	err := s.saveGroup(ctx, jobs)
	if err != nil && len(jobs) == 1 && jobs[0].unstorable.reason == "" && database.RefusesData(err) {
		jobs = newJobs(group)
		jobs[0].unstorable = unstorable{reason: fmt.Sprintf("cannot be stored as sent: postgres refused it (%s)", refusal(err))}
		err = s.saveGroup(ctx, jobs)
		if database.RefusesData(err) {
			err = fmt.Errorf("%w: %w", ErrUnstorable, err)
		}
	}
	if err == nil {
		for _, j := range jobs {
			if j.letter != nil {
				s.letters.Written(ctx, *j.letter)
			}
		}
	}
	results := make([]Saved, len(group))
	for i, j := range jobs {
		results[i] = Saved{Outcome: j.out, EventID: j.Event.Event.EventID, Err: err}
		if j.unstorable.reason != "" {
			results[i].EventID = storedEventID(j.Event.Event.EventID)
		}
		switch {
		case err != nil:
			results[i].Outcome = ""
		case j.unstorable.reason != "":
			results[i].Reason = j.unstorable.reason
		default:
			results[i].Reason = j.Event.Problem
		}
	}
	return results
}

func newJobs(group []Pending) []*job {
	jobs := make([]*job, len(group))
	for i, p := range group {
		jobs[i] = &job{Pending: p, unstorable: checkStorable(p)}
	}
	return jobs
}

// refusal is the code and message of the Postgres error in err.
func refusal(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code + " " + pgErr.Message
	}
	return err.Error()
}

func (s *Store) saveGroup(ctx context.Context, jobs []*job) error {
	if fastPath(jobs) {
		err := s.saveGroupInOne(ctx, jobs)
		if !database.IsUniqueViolation(err, "webhook_events_provider_event_id_key") {
			return err
		}
		// A duplicate aborted the pipeline and nothing was written: the two
		// round trip path below answers it as one.
	}
	return s.saveGroupInTwo(ctx, jobs)
}

// fastPath reports whether every webhook of the group can be committed in a
// single round trip: events that credit or change no money, whose partition
// key and outbox row need nothing read first. (Payout outcomes need their
// payout's owner and the stale flag in their outbox row; dead letters are
// rare.)
func fastPath(jobs []*job) bool {
	for _, j := range jobs {
		e := j.Event.Event
		if j.Event.Problem != "" || j.unstorable.reason != "" || (e.Action != event.ActionCredit && e.Action != event.ActionNone) ||
			(e.UserID == "" && e.PayoutID != "") {
			return false
		}
	}
	return true
}

// saveGroupInOne sends BEGIN, the group's event insert, its outbox insert
// and COMMIT as one pipeline: one round trip and four statements for the
// whole group.
func (s *Store) saveGroupInOne(ctx context.Context, jobs []*job) error {
	n := len(jobs)
	var (
		providers, eventIDs, types, objects = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		users, currencies, corrIDs, states  = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		amounts                             = make([]int64, n)
		occurred                            = make([]time.Time, n)
		bodies                              = make([][]byte, n)
	)
	for i, j := range jobs {
		e := &j.Event.Event
		providers[i], eventIDs[i], types[i], objects[i] = e.Provider, e.EventID, e.Type, e.Reference
		users[i], currencies[i], corrIDs[i], states[i] = e.UserID, e.Currency, j.CorrelationID, e.ObjectStatus
		amounts[i], occurred[i], bodies[i] = e.Amount, e.OccurredAt, j.Body
		if err := j.prepare("", s.proof); err != nil {
			return err
		}
	}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	insert, err := queue(b, func(q *sqlcdb.Queries) {
		_, _ = q.InsertEvents(ctx, sqlcdb.InsertEventsParams{Providers: providers, EventIDs: eventIDs, EventTypes: types,
			ObjectIDs: objects, UserIDs: users, Amounts: amounts, Currencies: currencies, OccurredAts: occurred,
			Payloads: bodies, CorrelationIDs: corrIDs, Statuses: states, ReceivedAt: s.now()})
	})
	if err != nil {
		return err
	}
	insert.Query(func(rows pgx.Rows) error {
		fresh, err := pgx.CollectRows(rows, pgx.RowTo[bool])
		if err != nil {
			return err
		}
		if len(fresh) != len(jobs) {
			return fmt.Errorf("event insert answered %d rows for %d events", len(fresh), len(jobs))
		}
		for i, j := range jobs {
			j.out = Accepted
			if j.Event.Event.Reference != "" && !fresh[i] {
				// Recorded as stale in psp_objects; a credit or an event
				// that moves no money is harmless either way.
				j.out = Stale
			}
		}
		return nil
	})
	if err := s.queueOutbox(ctx, b, jobs); err != nil {
		return err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("save webhooks: %w", err)
	}
	defer conn.Release()
	return s.commit(ctx, conn, b, true)
}

// commit queues COMMIT at the end of b — and after it, when one is due, the
// relays' wake-up, so that it costs no round trip of its own — and sends b.
// It returns nil when the transaction committed, even if the wake-up then
// failed (the notifier sends another).
func (s *Store) commit(ctx context.Context, conn *pgxpool.Conn, b *pgx.Batch, wake bool) error {
	committed := false
	b.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error {
		committed = ct.String() == "COMMIT"
		return nil
	})
	notified := wake && s.notify.QueueNotify(b)
	err := conn.SendBatch(ctx, b).Close()
	if (notified && err != nil) || (wake && !notified && committed) {
		s.notify.Notify()
	}
	if !committed {
		if err == nil {
			err = errors.New("the transaction was rolled back")
		}
		return s.fail(ctx, conn, err)
	}
	return nil
}

// prepare computes the job's partition key, outbox payload and headers,
// with the event's proof when it moves money and proof is set.
func (j *job) prepare(owner string, proof *eventproof.Keys) error {
	e := j.Event.Event
	j.key = partitionKey(e, owner)
	var err error
	if j.payload, err = envelope(e); err != nil {
		return err
	}
	j.headers = map[string]string{
		kafkax.HeaderCorrelationID: j.CorrelationID,
		kafkax.HeaderEventType:     e.Type,
		kafkax.HeaderMessageID:     e.MessageID(),
		"provider":                 e.Provider,
	}
	for k, v := range j.TraceHeaders {
		j.headers[k] = v
	}
	if proof != nil && eventproof.Required(e.Action) {
		j.headers[eventproof.Header] = proof.Sign(e)
	}
	return nil
}

// envelope encodes e for the outbox with its raw body appended as received.
// encoding/json would validate and compact that kilobyte again (a fifth of
// the envelope's cost on the hot path); the normaliser has already parsed
// the whole body as JSON, and Postgres parses the jsonb once more: a body
// it refuses fails the group, which is retried webhook by webhook, and the
// webhook alone is stored as unstorable (SaveGroup).
func envelope(e event.PSPEvent) ([]byte, error) {
	raw := e.Raw
	e.Raw = nil
	b, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode envelope: %w", err)
	}
	if len(raw) == 0 {
		return b, nil
	}
	// Raw is PSPEvent's last field: a nil one ends the encoding.
	head, ok := bytes.CutSuffix(b, []byte(`"raw":null}`))
	if !ok {
		return nil, fmt.Errorf("encode envelope: raw is not the envelope's last field")
	}
	out := make([]byte, 0, len(head)+len(`"raw":`)+len(raw)+1)
	out = append(append(append(out, head...), `"raw":`...), raw...)
	return append(out, '}'), nil
}

// queueOutbox queues the outbox rows of jobs (outbox.Queue takes their key
// locks in an order that cannot deadlock against concurrent groups).
func (s *Store) queueOutbox(ctx context.Context, b *pgx.Batch, jobs []*job) error {
	msgs := make([]outbox.Message, len(jobs))
	for i, j := range jobs {
		msgs[i] = outbox.Message{
			Topic: kafkax.TopicWebhookPending, EventType: j.Event.Event.Type, PartitionKey: j.key,
			Payload: j.payload, Headers: j.headers, CorrelationID: j.CorrelationID,
		}
	}
	return outbox.Queue(ctx, b, msgs, nil)
}

// saveGroupInTwo is the general path: BEGIN with the event inserts, then,
// with what they answered, the outbox rows (or dead letters) with COMMIT.
func (s *Store) saveGroupInTwo(ctx context.Context, jobs []*job) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("save webhooks: %w", err)
	}
	// A connection released inside a transaction (an error below) is
	// closed by the pool, never reused half-done.
	defer conn.Release()

	first := &pgx.Batch{}
	first.Queue("BEGIN")
	for _, j := range jobs {
		e := j.Event.Event
		if j.unstorable.reason != "" {
			if err := queueUnstorable(ctx, first, j, s.now()); err != nil {
				return s.fail(ctx, conn, err)
			}
			continue
		}
		insert, err := queue(first, func(q *sqlcdb.Queries) {
			_, _ = q.InsertEvent(ctx, sqlcdb.InsertEventParams{Provider: e.Provider, EventID: e.EventID, EventType: e.Type,
				ObjectID: e.Reference, UserID: e.UserID, Amount: e.Amount, Currency: e.Currency, OccurredAt: e.OccurredAt,
				Payload: j.Body, CorrelationID: j.CorrelationID, Status: e.ObjectStatus, Track: !payoutOutcome(e), ReceivedAt: s.now()})
		})
		if err != nil {
			return s.fail(ctx, conn, err)
		}
		insert.QueryRow(func(r pgx.Row) error {
			return r.Scan(&j.id, &j.fresh) // id: NULL for a duplicate
		})
		if moneyBack(e) {
			owner, err := queue(first, func(q *sqlcdb.Queries) { _, _ = q.PaymentOwner(ctx, e.Provider+":"+e.Reference) })
			if err != nil {
				return s.fail(ctx, conn, err)
			}
			owner.QueryRow(func(r pgx.Row) error {
				if err := r.Scan(&j.owner); err != nil && !errors.Is(err, pgx.ErrNoRows) {
					return err
				}
				return nil
			})
		}
		if e.UserID == "" && e.PayoutID != "" {
			if pid, err := uuid.Parse(e.PayoutID); err == nil {
				owner, err := queue(first, func(q *sqlcdb.Queries) { _, _ = q.PayoutOwner(ctx, pid) })
				if err != nil {
					return s.fail(ctx, conn, err)
				}
				owner.QueryRow(func(r pgx.Row) error {
					if err := r.Scan(&j.owner); err != nil && !errors.Is(err, pgx.ErrNoRows) {
						return err
					}
					return nil
				})
			}
		}
	}
	if err := conn.SendBatch(ctx, first).Close(); err != nil {
		return s.fail(ctx, conn, err)
	}

	var publish []*job
	for _, j := range jobs {
		if j.id == nil {
			j.out = Duplicate
			continue
		}
		if j.unstorable.reason != "" {
			j.out = DeadLettered
			if err := s.deadLetterUnstorable(ctx, conn, j); err != nil {
				return s.fail(ctx, conn, err)
			}
			continue
		}
		e := &j.Event.Event
		j.out = Accepted
		if e.Reference != "" && j.fresh == 0 && !payoutOutcome(*e) {
			e.Stale, j.out = true, Stale
		}
		if err := j.prepare(j.owner, s.proof); err != nil {
			return s.fail(ctx, conn, err)
		}
		if j.Event.Problem == "" {
			publish = append(publish, j)
			continue
		}
		// Rare: the dead letter is written in the open transaction.
		j.out = DeadLettered
		now := s.now()
		l := dlq.Letter{
			Source: dlq.SourceIngest, OriginalTopic: kafkax.TopicWebhookPending, PartitionKey: j.key,
			EventType: e.Type, Payload: j.payload, Headers: j.headers, Error: j.Event.Problem,
			ErrorClass: string(errclass.Permanent), FirstFailureAt: now, FailedAt: now, CorrelationID: j.CorrelationID,
			RetryHistory: []dlq.Attempt{{At: now, Error: j.Event.Problem, Class: string(errclass.Permanent)}},
		}
		if err := s.insertLetter(ctx, conn, j, l); err != nil {
			return s.fail(ctx, conn, err)
		}
	}

	second := &pgx.Batch{}
	if err := s.queueOutbox(ctx, second, publish); err != nil {
		return s.fail(ctx, conn, err)
	}
	return s.commit(ctx, conn, second, len(publish) > 0)
}

// fail rolls the open transaction back and says why it was not saved. The
// cause stays in the chain (a duplicate on the one round trip path is
// recognised by its unique violation, data Postgres refused by its code).
func (s *Store) fail(ctx context.Context, conn *pgxpool.Conn, err error) error {
	_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK") // a broken connection is closed on release
	return fmt.Errorf("save webhooks: %w", err)
}

// queueUnstorable queues the inbox row of an event that cannot be stored as
// sent: its identifiers where they can be stored, NULL where not, and its
// body, or a note when jsonb refuses the body.
func queueUnstorable(ctx context.Context, b *pgx.Batch, j *job, now time.Time) error {
	e := j.Event.Event
	insert, err := queue(b, func(q *sqlcdb.Queries) {
		_, _ = q.InsertUnstorable(ctx, sqlcdb.InsertUnstorableParams{Provider: e.Provider, EventID: storedEventID(e.EventID),
			EventType: clip(e.Type, maxField), ObjectID: keep(e.Reference, maxField), UserID: keep(e.UserID, event.MaxUserID),
			Amount: e.Amount, Currency: keep(e.Currency, maxField), OccurredAt: storableTime(e.OccurredAt, now),
			Payload: inboxPayload(j.Body, j.unstorable), CorrelationID: j.CorrelationID, ReceivedAt: now})
	})
	if err != nil {
		return err
	}
	insert.QueryRow(func(r pgx.Row) error {
		err := r.Scan(&j.id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // a duplicate: id stays nil
		}
		return err
	})
	return nil
}

// deadLetterUnstorable stores the body of an unstorable event, byte for
// byte, in the dead-letter store, in the open transaction. It is not
// replayable (dlq.PayloadPSPWebhook): nothing can publish it as it is, and
// no money moves until a person settles it with the PSP's record.
func (s *Store) deadLetterUnstorable(ctx context.Context, conn *pgxpool.Conn, j *job) error {
	e := j.Event.Event
	now := s.now()
	key := keep(e.UserID, event.MaxUserID)
	if key == "" {
		key = clip(e.Provider+":"+e.Reference, maxField)
	}
	return s.insertLetter(ctx, conn, j, dlq.Letter{
		Source: dlq.SourceIngest, OriginalTopic: kafkax.TopicWebhookPending, PartitionKey: key,
		EventType: clip(e.Type, maxField), Payload: j.Body, Error: j.unstorable.reason,
		Headers: map[string]string{
			kafkax.HeaderCorrelationID: j.CorrelationID,
			kafkax.HeaderEventType:     clip(e.Type, maxField),
			dlq.HeaderPayloadFormat:    dlq.PayloadPSPWebhook,
			"provider":                 e.Provider,
			"event_id":                 storedEventID(e.EventID),
		},
		ErrorClass: string(errclass.Permanent), FirstFailureAt: now, FailedAt: now, CorrelationID: j.CorrelationID,
		RetryHistory: []dlq.Attempt{{At: now, Error: j.unstorable.reason, Class: string(errclass.Permanent)}},
	})
}

// insertLetter stores j's dead letter in the open transaction; SaveGroup
// counts it once the transaction committed.
func (s *Store) insertLetter(ctx context.Context, conn *pgxpool.Conn, j *job, l dlq.Letter) error {
	_, inserted, err := s.letters.Insert(ctx, conn, l)
	if err == nil && inserted {
		j.letter = &l
	}
	return err
}

// payoutOutcome reports whether e reports a payout's outcome. Those are
// not judged stale here: psp_objects would count every event, including a
// forged or mismatched one the worker then refuses, and one dated ahead
// would make the genuine event that follows look stale, leaving its payout
// in AWAITING_RESPONSE for good. The worker orders them against the latest
// event it applied to the payout (payouts.psp_updated_at).
//
// Refunds and disputes are not judged stale here either: their events name
// the payment as Reference, and one payment has many objects (several
// refunds, a dispute), so the payment's latest time says nothing about one
// of them. The worker orders them per refund or dispute (payment_returns).
func payoutOutcome(e event.PSPEvent) bool {
	switch e.Action {
	case event.ActionPayoutPaid, event.ActionPayoutFailed, event.ActionPayoutReversed:
		return true
	}
	return moneyBack(e)
}

// moneyBack reports whether e is about a refund or a dispute of a payment.
func moneyBack(e event.PSPEvent) bool {
	return e.Action == event.ActionRefund || e.Action == event.ActionDispute
}

// partitionKey is the wallet owner: from the event, or for a payout outcome
// the owner of the payout it names, or for a refund or dispute the wallet
// its payment was credited to (looked up in the first round trip), so all
// of a wallet's records share a partition.
func partitionKey(e event.PSPEvent, owner string) string {
	switch {
	case moneyBack(e) && owner != "":
		return owner
	case e.UserID != "":
		return e.UserID
	case owner != "":
		return owner
	case e.PayoutID != "":
		return "payout:" + e.PayoutID
	}
	return e.Provider + ":" + e.Reference
}
