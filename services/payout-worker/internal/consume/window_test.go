package consume_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/consume"
)

// TestASlowRecordHoldsBackOnlyItsKeyAndTheCommit: while one record is slow
// (a PSP call that takes its time), records polled after it — on the same
// partition — are handled, instead of waiting for the slow record's batch
// to finish; a later record of the slow key waits for it; and the
// partition's committed offset stays at the slow record until it is done.
func TestASlowRecordHoldsBackOnlyItsKeyAndTheCommit(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := setup(t, consume.Config{}, map[string]func(int) error{
		"slow": func(n int) error {
			if n == 1 {
				<-release
			}
			return nil
		},
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	producer := kafkatest.NewClient(t, b.kafka, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(key string) {
		t.Helper()
		rec := &kgo.Record{Topic: kafkax.TopicWebhookPending, Partition: 0, Key: []byte(key), Value: []byte(`{}`),
			Headers: []kgo.RecordHeader{{Key: kafkax.HeaderMessageID, Value: []byte("msg-" + key)}}}
		require.NoError(t, producer.ProduceSync(context.Background(), rec).FirstErr())
	}
	committed := func() int64 {
		t.Helper()
		offsets, err := kadm.NewClient(kafkatest.NewClient(t, b.kafka)).FetchOffsets(context.Background(), "payout-worker")
		require.NoError(t, err)
		o, ok := offsets.Lookup(kafkax.TopicWebhookPending, 0)
		if !ok {
			return 0
		}
		return o.At
	}

	produce("slow") // offset 0
	require.Eventually(t, func() bool { return b.h.attempts("slow") == 1 }, 20*time.Second, 5*time.Millisecond)
	// Polled while the slow record is in flight: each is handled on its own.
	for _, k := range others {
		produce(k)
		b.waitDone(t, k)
	}
	produce("slow") // the slow key's second record waits behind its first
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, 1, b.h.attempts("slow"), "a key's later record started before its earlier one finished")
	require.False(t, b.h.done("slow"))
	require.Zero(t, committed(), "the offset moved past a record still in flight")

	close(release)
	b.waitDone(t, "slow")
	require.Eventually(t, func() bool { return b.h.attempts("slow") == 2 }, 20*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return committed() == int64(len(others)+2) }, 20*time.Second, 20*time.Millisecond,
		"every record done, the whole partition committed")
}
