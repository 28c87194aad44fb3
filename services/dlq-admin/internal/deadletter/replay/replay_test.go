package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/jobs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

type bundle struct {
	db  *pgtest.DB
	st  *store.Store
	svc *replay.Service
	// offset makes each inserted consumer letter's origin unique.
	mu     sync.Mutex
	offset int64
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db := pgtest.New(t)
	st := store.New(db.Pool)
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	queue, err := jobs.InsertOnly(db.Pool, logger)
	require.NoError(t, err)
	svc := replay.New(db.Pool, st, lifecycle.Deps{Logger: logger, Clock: func() time.Time { return t0.Add(time.Hour) }}).WithJobs(queue)
	return &bundle{db: db, st: st, svc: svc}
}

// letter is a consumer letter on aegis.transactions, changed by edit.
func (b *bundle) letter(t *testing.T, edit func(*dlq.Letter)) int64 {
	t.Helper()
	b.mu.Lock()
	b.offset++
	off := b.offset
	b.mu.Unlock()
	p := int32(3)
	l := dlq.Letter{
		Source: dlq.SourceConsumer, OriginalTopic: kafkax.TopicTransactions, OriginalPartition: &p, OriginalOffset: &off,
		ConsumerGroup: "payout-worker", PartitionKey: "alice", EventType: "payout.requested",
		Payload: []byte(`{"payout_id":"p-1","user_id":"alice","amount":700}`),
		Headers: map[string]string{kafkax.HeaderMessageID: "payout:p-1:request", kafkax.HeaderCorrelationID: "corr-1",
			kafkax.HeaderEventType: "payout.requested", "provider": "stripe"},
		Error: "psp timeout", ErrorClass: "transient", RetryCount: 5, CorrelationID: "corr-1",
		RetryHistory: []dlq.Attempt{{At: t0, Error: "psp timeout", Class: "transient"}}, FirstFailureAt: t0, FailedAt: t0,
	}
	if edit != nil {
		edit(&l)
	}
	id, ok, err := dlq.Insert(context.Background(), b.db.Pool, l)
	require.NoError(t, err)
	require.True(t, ok)
	return id
}

type outboxRow struct {
	ID           int64
	Topic        string
	EventType    string
	PartitionKey string
	Payload      map[string]any
	Headers      map[string]string
	Correlation  string
}

func (b *bundle) outbox(t *testing.T) []outboxRow {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT id, topic, event_type, partition_key, payload, headers, correlation_id
		FROM transaction_outbox ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		var payload, headers []byte
		require.NoError(t, rows.Scan(&r.ID, &r.Topic, &r.EventType, &r.PartitionKey, &payload, &headers, &r.Correlation))
		require.NoError(t, json.Unmarshal(payload, &r.Payload))
		require.NoError(t, json.Unmarshal(headers, &r.Headers))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

func (b *bundle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), q, args...).Scan(&n))
	return n
}

func TestReplayWritesTheOutboxRowOnceAndResolves(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.letter(t, nil)

	res, err := b.svc.Replay(ctx, id, "bob", "psp fixed")
	require.NoError(t, err)
	rows := b.outbox(t)
	require.Len(t, rows, 1)
	r := rows[0]
	require.Equal(t, res.OutboxID, r.ID)
	require.Equal(t, kafkax.TopicTransactions, r.Topic, "the original topic, not its .dlq")
	require.Equal(t, "alice", r.PartitionKey)
	require.Equal(t, "payout.requested", r.EventType)
	require.Equal(t, "corr-1", r.Correlation)
	require.Equal(t, map[string]any{"payout_id": "p-1", "user_id": "alice", "amount": float64(700)}, r.Payload)
	require.Equal(t, map[string]string{
		kafkax.HeaderMessageID:     fmt.Sprintf("payout:p-1:request:replay:%d:1", id),
		kafkax.HeaderCorrelationID: "corr-1",
		kafkax.HeaderEventType:     "payout.requested",
		"provider":                 "stripe",
		replay.HeaderReplayOf:      fmt.Sprint(id),
		replay.HeaderReplayCount:   "1",
	}, r.Headers)

	l := res.Letter
	require.Equal(t, store.StatusReplayed, l.Status)
	require.Equal(t, "bob", *l.ResolvedBy)
	require.Equal(t, "psp fixed", *l.ResolutionReason)
	require.Equal(t, t0.Add(time.Hour), l.ResolvedAt.UTC())
	require.Equal(t, 1, l.ReplayCount)
	require.Equal(t, res.OutboxID, *l.ReplayOutboxID)

	var actor, action, target, reason string
	var detail map[string]any
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT actor, action, target_id, reason, detail FROM audit_log WHERE target_type = 'dead_letter'`).
		Scan(&actor, &action, &target, &reason, &detail))
	require.Equal(t, []string{"bob", "replay", fmt.Sprint(id), "psp fixed"}, []string{actor, action, target, reason})
	require.Equal(t, float64(res.OutboxID), detail["outbox_id"])

	// A second replay, and a discard of the replayed letter, are refused
	// and change nothing.
	_, err = b.svc.Replay(ctx, id, "bob", "")
	require.ErrorIs(t, err, replay.ErrNotOpen)
	_, err = b.svc.Discard(ctx, id, "bob", "never mind")
	require.ErrorIs(t, err, replay.ErrNotOpen)
	require.Len(t, b.outbox(t), 1)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log`))

	_, err = b.svc.Replay(ctx, id+100, "bob", "")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestReplayHeaderRulesBySource(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	outboxID := int64(42)
	relay := b.letter(t, func(l *dlq.Letter) {
		l.Source, l.OriginalPartition, l.OriginalOffset, l.OutboxID = dlq.SourceRelay, nil, nil, &outboxID
		l.OriginalTopic = kafkax.TopicWebhookPending
	})
	ingest := b.letter(t, func(l *dlq.Letter) {
		l.Source, l.OriginalPartition, l.OriginalOffset = dlq.SourceIngest, nil, nil
		l.OriginalTopic = kafkax.TopicWebhookPending
	})
	bare := b.letter(t, func(l *dlq.Letter) { l.Headers, l.EventType, l.CorrelationID = nil, "", "" })

	for _, id := range []int64{relay, ingest, bare} {
		_, err := b.svc.Replay(ctx, id, "bob", "")
		require.NoError(t, err)
	}
	rows := b.outbox(t)
	require.Len(t, rows, 3)
	require.Equal(t, "payout:p-1:request", rows[0].Headers[kafkax.HeaderMessageID], "the consumer never applied a relay letter: same id")
	require.Equal(t, kafkax.TopicWebhookPending, rows[0].Topic)
	require.Equal(t, "payout:p-1:request", rows[1].Headers[kafkax.HeaderMessageID], "nor an ingest letter")
	require.Equal(t, fmt.Sprintf("dl-%d:replay:%d:1", bare, bare), rows[2].Headers[kafkax.HeaderMessageID])
	require.Equal(t, replay.DefaultEventType, rows[2].EventType)
	require.Equal(t, map[string]string{
		kafkax.HeaderMessageID:   fmt.Sprintf("dl-%d:replay:%d:1", bare, bare),
		replay.HeaderReplayOf:    fmt.Sprint(bare),
		replay.HeaderReplayCount: "1",
	}, rows[2].Headers, "the stored headers plus the replay's, nothing else")
}

func TestPoisonIsNotReplayableAndNothingChanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.letter(t, func(l *dlq.Letter) { l.Payload = []byte{0xff, 'n', 'o', 't', ' ', 'j', 's', 'o', 'n'} })
	_, err := b.svc.Replay(context.Background(), id, "bob", "")
	require.ErrorIs(t, err, replay.ErrNotReplayable)
	require.Contains(t, err.Error(), "not JSON")
	require.Empty(t, b.outbox(t))
	require.Zero(t, b.count(t, `SELECT count(*) FROM audit_log`))
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM dead_letters WHERE status = 'open' AND replay_count = 0`))

	nowhere := b.letter(t, func(l *dlq.Letter) { l.OriginalTopic = "" })
	_, err = b.svc.Replay(context.Background(), nowhere, "bob", "")
	require.ErrorIs(t, err, replay.ErrNotReplayable)
	require.Empty(t, b.outbox(t))
}

// A letter names its own topic (a header on the .dlq record anyone who can
// produce to Kafka could set): a replay publishes only to the contract's
// topics, so it cannot be used to write anywhere else.
func TestReplayPublishesOnlyToTheContractsTopics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, topic := range []string{"aegis.internal.billing", "__consumer_offsets", "aegis.transactions ", "AEGIS.TRANSACTIONS"} {
		id := b.letter(t, func(l *dlq.Letter) { l.OriginalTopic = topic })
		_, err := b.svc.Replay(context.Background(), id, "bob", "")
		require.ErrorIs(t, err, replay.ErrNotReplayable, topic)
		require.Contains(t, err.Error(), "not one of Aegis's topics")
	}
	require.Empty(t, b.outbox(t))
	require.Zero(t, b.count(t, `SELECT count(*) FROM audit_log`))

	for _, topic := range []string{kafkax.TopicSettlements, kafkax.DLQTopic(kafkax.TopicTransactions)} {
		id := b.letter(t, func(l *dlq.Letter) { l.OriginalTopic = topic })
		_, err := b.svc.Replay(context.Background(), id, "bob", "")
		require.NoError(t, err, topic)
	}
	require.Len(t, b.outbox(t), 2)
}

// A PSP webhook dead-lettered at ingest as it was received (it could not be
// stored as sent) is not a message of its topic: it is never published.
func TestRawPSPWebhookIsNotReplayable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, ok, err := dlq.Insert(context.Background(), b.db.Pool, dlq.Letter{
		Source: dlq.SourceIngest, OriginalTopic: kafkax.TopicWebhookPending, PartitionKey: "stripe:pi_1",
		EventType: "payment_intent.succeeded", Payload: []byte(`{"id":"evt_1","type":"payment_intent.succeeded"}`),
		Headers: map[string]string{dlq.HeaderPayloadFormat: dlq.PayloadPSPWebhook}, Error: "cannot be stored as sent",
		ErrorClass: "permanent", FirstFailureAt: t0, FailedAt: t0,
	})
	require.NoError(t, err)
	require.True(t, ok)
	_, err = b.svc.Replay(context.Background(), id, "bob", "")
	require.ErrorIs(t, err, replay.ErrNotReplayable)
	require.Contains(t, err.Error(), "PSP webhook as received")
	require.Empty(t, b.outbox(t))
}

func TestConcurrentReplaysOfOneLetterReplayItOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id := b.letter(t, nil)
	const n = 6
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.svc.Replay(context.Background(), id, fmt.Sprintf("op-%d", i), "")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		if err == nil {
			ok++
			continue
		}
		require.ErrorIs(t, err, replay.ErrNotOpen)
	}
	require.Equal(t, 1, ok)
	require.Len(t, b.outbox(t), 1)
}

func TestDiscardNeedsAReason(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	id := b.letter(t, nil)
	for _, reason := range []string{"", "   \n"} {
		_, err := b.svc.Discard(ctx, id, "bob", reason)
		var invalid *input.Invalid
		require.ErrorAs(t, err, &invalid)
		require.Equal(t, "reason", invalid.Param)
	}
	d, err := b.svc.Discard(ctx, id, "bob", " duplicate of #3 ")
	require.NoError(t, err)
	require.Equal(t, store.StatusDiscarded, d.Status)
	require.Equal(t, "duplicate of #3", *d.ResolutionReason)
	require.Equal(t, "bob", *d.ResolvedBy)
	require.Equal(t, 1, b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'discard' AND reason = 'duplicate of #3' AND actor = 'bob'`))

	_, err = b.svc.Discard(ctx, id, "bob", "again")
	require.ErrorIs(t, err, replay.ErrNotOpen)
	_, err = b.svc.Replay(ctx, id, "bob", "")
	require.ErrorIs(t, err, replay.ErrNotOpen)
	require.Empty(t, b.outbox(t))
}
