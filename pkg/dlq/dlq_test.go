package dlq_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

func consumerLetter() dlq.Letter {
	p, o := int32(2), int64(41)
	first := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	return dlq.Letter{
		Source: dlq.SourceConsumer, OriginalTopic: kafkax.TopicTransactions,
		OriginalPartition: &p, OriginalOffset: &o, ConsumerGroup: "payout-worker",
		PartitionKey: "user-1", EventType: "payout.requested",
		Payload: []byte(`{"payout_id":"p1"}`),
		Headers: map[string]string{"correlation_id": "corr-1", "event_type": "payout.requested",
			// a previous failure's headers, as on a replayed message that fails again
			dlq.HeaderError: "old error", dlq.HeaderRetryCount: "9"},
		Error: "psp rejected: account_invalid", ErrorClass: "permanent", RetryCount: 2,
		RetryHistory:   []dlq.Attempt{{At: first, Error: "timeout", Class: "transient"}, {At: first.Add(5 * time.Second), Error: "psp rejected: account_invalid", Class: "permanent"}},
		FirstFailureAt: first, FailedAt: first.Add(5 * time.Second), CorrelationID: "corr-1",
	}
}

func TestRecordRoundTripReplacesOldFailureHeaders(t *testing.T) {
	t.Parallel()
	l := consumerLetter()
	rec, err := l.Record()
	require.NoError(t, err)
	require.Equal(t, "aegis.transactions.dlq", rec.Topic)
	require.Equal(t, "user-1", string(rec.Key))

	count := map[string]int{}
	for _, h := range rec.Headers {
		count[h.Key]++
	}
	for k, n := range count {
		require.Equal(t, 1, n, "header %s appears %d times", k, n)
	}
	require.Equal(t, "psp rejected: account_invalid", kafkax.Header(rec, dlq.HeaderError))
	require.Equal(t, "2", kafkax.Header(rec, dlq.HeaderRetryCount))
	for _, k := range []string{"original_topic", "original_partition", "original_offset", "consumer_group", "error",
		"error_class", "retry_count", "retry_history", "first_failure_at", "failed_at", "correlation_id"} {
		require.NotEmpty(t, kafkax.Header(rec, k), "header %s missing", k)
	}

	rec.Partition, rec.Offset = 0, 7
	back, problems := dlq.FromRecord(rec)
	require.Empty(t, problems)
	require.Equal(t, l.OriginalTopic, back.OriginalTopic)
	require.Equal(t, *l.OriginalPartition, *back.OriginalPartition)
	require.Equal(t, *l.OriginalOffset, *back.OriginalOffset)
	require.Equal(t, l.RetryHistory, back.RetryHistory)
	require.True(t, l.FirstFailureAt.Equal(back.FirstFailureAt))
	require.Equal(t, map[string]string{"correlation_id": "corr-1", "event_type": "payout.requested"}, back.Headers)
}

func TestFromRecordToleratesBareRecords(t *testing.T) {
	t.Parallel()
	l, problems := dlq.FromRecord(&kgo.Record{Topic: "aegis.webhook.pending.dlq", Partition: 1, Offset: 9, Value: []byte("garbage"), Timestamp: time.Now()})
	require.Empty(t, problems)
	require.Equal(t, "aegis.webhook.pending", l.OriginalTopic)
	require.Equal(t, dlq.SourceConsumer, l.Source)
	require.Equal(t, "unknown", l.ErrorClass)
	require.Equal(t, "aegis.webhook.pending.dlq", l.DLQTopic)
	require.EqualValues(t, 9, *l.DLQOffset)
}

func TestInsertIsIdempotentOnOrigin(t *testing.T) {
	t.Parallel()
	tx := pgtest.Tx(t)
	ctx := context.Background()
	l := consumerLetter()

	id, inserted, err := dlq.Insert(ctx, tx, l)
	require.NoError(t, err)
	require.True(t, inserted)
	again, inserted, err := dlq.Insert(ctx, tx, l)
	require.NoError(t, err)
	require.False(t, inserted, "the same origin must be stored once")
	require.Zero(t, again)

	outboxID := int64(99)
	relay := dlq.Letter{Source: dlq.SourceRelay, OriginalTopic: kafkax.TopicWebhookPending, OutboxID: &outboxID,
		Payload: []byte(`{}`), Error: "kafka unreachable", ErrorClass: "transient", RetryCount: 6,
		FirstFailureAt: time.Now(), FailedAt: time.Now()}
	_, inserted, err = dlq.Insert(ctx, tx, relay)
	require.NoError(t, err)
	require.True(t, inserted)
	_, inserted, err = dlq.Insert(ctx, tx, relay)
	require.NoError(t, err)
	require.False(t, inserted)

	var n int
	var history string
	require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM dead_letters").Scan(&n))
	require.Equal(t, 2, n)
	require.NoError(t, tx.QueryRow(ctx, "SELECT retry_history::text FROM dead_letters WHERE id = $1", id).Scan(&history))
	require.Contains(t, history, "account_invalid")
}

func TestOutboxMessageCarriesTheDeadLetterHeaders(t *testing.T) {
	t.Parallel()
	m, err := consumerLetter().OutboxMessage()
	require.NoError(t, err)
	require.Equal(t, "aegis.transactions.dlq", m.Topic)
	require.Equal(t, "user-1", m.PartitionKey)
	require.Equal(t, "41", m.Headers[dlq.HeaderOriginalOffset])
	require.Equal(t, "permanent", m.Headers[dlq.HeaderErrorClass])
	bad := consumerLetter()
	bad.Payload = []byte{0xff, 0x00}
	_, err = bad.OutboxMessage()
	require.Error(t, err)
}

func TestFromRecordKeepsAWellFormedRecord(t *testing.T) {
	t.Parallel()
	p, o := int32(1), int64(7)
	at := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	in := dlq.Letter{Source: dlq.SourceConsumer, OriginalTopic: "aegis.transactions", OriginalPartition: &p,
		OriginalOffset: &o, ConsumerGroup: "payout-worker", Payload: []byte{0, 1, 2}, Headers: map[string]string{"k": "v"},
		Error: "boom", ErrorClass: "permanent", RetryCount: 3, FirstFailureAt: at, FailedAt: at}
	r, err := in.Record()
	require.NoError(t, err)
	l, problems := dlq.FromRecord(r)
	require.Empty(t, problems)
	require.Equal(t, "boom", l.Error)
	require.Equal(t, int32(1), *l.OriginalPartition)
	require.Equal(t, int64(7), *l.OriginalOffset)
	require.Equal(t, 3, l.RetryCount)
	require.Equal(t, []byte{0, 1, 2}, l.Payload, "the payload is bytea: kept byte for byte")
}

func TestFromRecordNeverInventsAnOriginFromMalformedHeaders(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		headers map[string]string
		check   func(t *testing.T, l dlq.Letter)
	}{
		{"offset not a number", map[string]string{dlq.HeaderOriginalPartition: "1", dlq.HeaderOriginalOffset: "NaN"},
			func(t *testing.T, l dlq.Letter) {
				require.Nil(t, l.OriginalOffset, "never offset 0, which could be a real letter's origin")
				require.Equal(t, int32(1), *l.OriginalPartition)
			}},
		{"partition out of range", map[string]string{dlq.HeaderOriginalPartition: "4294967296"},
			func(t *testing.T, l dlq.Letter) { require.Nil(t, l.OriginalPartition) }},
		{"negative offset", map[string]string{dlq.HeaderOriginalOffset: "-5"},
			func(t *testing.T, l dlq.Letter) { require.Nil(t, l.OriginalOffset) }},
		{"retry count beyond int4", map[string]string{dlq.HeaderRetryCount: "3000000000"},
			func(t *testing.T, l dlq.Letter) { require.Zero(t, l.RetryCount) }},
		{"outbox id", map[string]string{dlq.HeaderSource: dlq.SourceRelay, dlq.HeaderOutboxID: "x"},
			func(t *testing.T, l dlq.Letter) {
				require.Nil(t, l.OutboxID)
				require.Equal(t, dlq.SourceRelay, l.Source)
			}},
		{"history", map[string]string{dlq.HeaderRetryHistory: `{"at":1}`},
			func(t *testing.T, l dlq.Letter) { require.Empty(t, l.RetryHistory) }},
		{"time", map[string]string{dlq.HeaderFailedAt: "yesterday"},
			func(t *testing.T, l dlq.Letter) { require.False(t, l.FailedAt.IsZero()) }},
		{"source", map[string]string{dlq.HeaderSource: "martian"},
			func(t *testing.T, l dlq.Letter) { require.Equal(t, dlq.SourceConsumer, l.Source) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &kgo.Record{Topic: "aegis.transactions.dlq", Partition: 0, Offset: 3, Value: []byte("v"), Timestamp: time.Now()}
			for k, v := range tc.headers {
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
			}
			l, problems := dlq.FromRecord(r)
			require.NotEmpty(t, problems)
			require.True(t, strings.Contains(l.Error, "dead-letter headers malformed"), l.Error)
			require.Equal(t, "v", string(l.Payload))
			tc.check(t, l)
		})
	}
}

func TestInsertSanitizesTextAndDedupesByDLQRecord(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	// No usable origin: only the DLQ record's position identifies it.
	rec := &kgo.Record{Topic: "aegis.transactions.dlq", Partition: 2, Offset: 11, Value: []byte{0xff},
		Headers: []kgo.RecordHeader{{Key: dlq.HeaderOriginalOffset, Value: []byte("junk")}, {Key: dlq.HeaderError, Value: []byte("bad\x00text\xfe")}}}
	l, problems := dlq.FromRecord(rec)
	require.NotEmpty(t, problems)
	_, inserted, err := dlq.Insert(ctx, db.Pool, l)
	require.NoError(t, err, "text Postgres refuses must not stall the writer")
	require.True(t, inserted)
	_, inserted, err = dlq.Insert(ctx, db.Pool, l)
	require.NoError(t, err)
	require.False(t, inserted, "a redelivered DLQ record is stored once")
	var payload []byte
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT payload FROM dead_letters").Scan(&payload))
	require.Equal(t, []byte{0xff}, payload, "the payload is kept byte for byte")
}

// A letter the payout sweeper writes (no record failed: no group, no
// offset) keeps its source through Kafka, so it is not taken for a
// consumer letter that lost its origin.
func TestFromRecordKeepsEverySource(t *testing.T) {
	t.Parallel()
	for _, source := range dlq.Sources() {
		at := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
		r, err := dlq.Letter{Source: source, OriginalTopic: "aegis.transactions", Payload: []byte(`{}`),
			Error: "parked", ErrorClass: "payout_deadline", FirstFailureAt: at, FailedAt: at}.Record()
		require.NoError(t, err)
		l, problems := dlq.FromRecord(r)
		require.Empty(t, problems, source)
		require.Equal(t, source, l.Source)
	}
}
