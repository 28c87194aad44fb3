package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/consumer"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
)

func TestAHandlerPanicDeadLettersThatRecordOnlyAndTheLoopGoesOn(t *testing.T) {
	t.Parallel()
	b := newHarness(t, map[string]func(int) error{
		"bug": func(int) error { var m map[string]int; m["x"]++; return nil }, //nolint:staticcheck // SA5000 is the point: a handler bug that panics
	})
	b.start(t, consumer.Config{Name: "loop-test/handler"}, nil, false)
	b.produce(t, 0, "bug")
	for _, k := range others {
		b.produce(t, 0, k)
	}
	b.waitDone(t, others...)
	l := b.deadLetters(t, 1)[0]
	require.Equal(t, "bug", l.PartitionKey)
	require.Equal(t, group, l.ConsumerGroup)
	require.Equal(t, "permanent", l.ErrorClass)
	require.Contains(t, l.Error, "panic in loop-test/handler")
	require.Equal(t, 1, b.h.attempts("bug"), "a panic is not retried in place")
	require.Equal(t, 1.0, b.panics.Value("loop-test/handler"))
	require.Eventually(t, func() bool { return b.committed(t, 0) == int64(len(others)+1) }, 10*time.Second, 20*time.Millisecond,
		"the dead-lettered record and those after it are committed")
	b.produce(t, 1, "after") // the loop is still alive and consuming
	b.waitDone(t, "after")
}

func TestTransientFailuresAreRetriedInPlaceThenDeadLetteredPastTheBound(t *testing.T) {
	t.Parallel()
	b := newHarness(t, map[string]func(int) error{
		"down":  func(int) error { return errclass.AsTransient(errors.New("store unreachable")) },
		"weird": func(int) error { return errors.New("an unclassified error") },
		"blip": func(n int) error {
			if n < 3 {
				return errclass.AsTransient(errors.New("blip"))
			}
			return nil
		},
	})
	b.start(t, consumer.Config{RetryAttempts: 4, RetryFor: time.Minute}, nil, false)
	for _, k := range append([]string{"down", "weird", "blip"}, others...) {
		b.produce(t, 0, k)
	}
	b.waitDone(t, append([]string{"blip"}, others...)...)
	require.Equal(t, 3, b.h.attempts("blip"), "a transient failure that clears is retried in place until it does")
	byKey := map[string]dlq.Letter{}
	for _, l := range b.deadLetters(t, 2) {
		byKey[l.PartitionKey] = l
	}
	for _, k := range []string{"down", "weird"} {
		l := byKey[k]
		require.Equal(t, "transient", l.ErrorClass, k)
		require.Equal(t, 4, l.RetryCount, k)
		require.Len(t, l.RetryHistory, 4, k)
		require.Contains(t, l.Error, "still failing after 4 in-place attempts", k)
		require.Equal(t, 4, b.h.attempts(k), k)
	}
}

func TestTransientRetriesStopAfterRetryFor(t *testing.T) {
	t.Parallel()
	b := newHarness(t, map[string]func(int) error{
		"down": func(int) error { return errclass.AsTransient(errors.New("down")) },
	})
	b.start(t, consumer.Config{RetryAttempts: 1000, RetryFor: 300 * time.Millisecond}, nil, false)
	b.produce(t, 0, "down")
	l := b.deadLetters(t, 1)[0]
	require.Equal(t, "transient", l.ErrorClass)
	require.Less(t, b.h.attempts("down"), 1000)
}

// TestASlowRecordHoldsBackOnlyItsKeyAndTheCommit: while one record is slow
// (a PSP call that takes its time), records polled after it on the same
// partition are handled instead of waiting for it; a later record of the
// slow key waits for it; and the partition's committed offset stays at the
// slow record until it is done.
func TestASlowRecordHoldsBackOnlyItsKeyAndTheCommit(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := newHarness(t, map[string]func(int) error{
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
	queued := make(chan string, 64)
	// One window for the whole test: the slow key's second record is
	// polled while its first is in flight.
	b.start(t, consumer.Config{Window: time.Minute, OnQueued: onQueued(queued)}, nil, false)

	b.produce(t, 0, "slow") // offset 0
	require.Eventually(t, func() bool { return b.h.attempts("slow") == 1 }, 20*time.Second, 5*time.Millisecond)
	// Polled while the slow record is in flight: each is handled on its own.
	for _, k := range others {
		b.produce(t, 0, k)
		b.waitDone(t, k)
	}
	b.produce(t, 0, "slow") // the slow key's second record waits behind its first
	waitQueued(t, queued, "slow")
	require.Equal(t, 1, b.h.attempts("slow"), "a key's later record started before its earlier one finished")
	require.False(t, b.h.done("slow"))
	require.Zero(t, b.committed(t, 0), "the offset moved past a record still in flight")

	close(release)
	b.waitDone(t, "slow")
	require.Eventually(t, func() bool { return b.h.attempts("slow") == 2 }, 20*time.Second, 5*time.Millisecond)
	require.Eventually(t, func() bool { return b.committed(t, 0) == int64(len(others)+2) }, 20*time.Second, 20*time.Millisecond,
		"every record done, the whole partition committed")
}

// With PerPartition a slow record holds back every later record of its
// partition, whatever their keys, and none of another partition.
func TestPerPartitionOrderHandlesAPartitionOneRecordAtATime(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := newHarness(t, map[string]func(int) error{
		"slow": func(int) error { <-release; return nil },
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	queued := make(chan string, 64) // one window: "behind" is polled while "slow" is in flight
	b.start(t, consumer.Config{Order: consumer.PerPartition, Window: time.Minute, OnQueued: onQueued(queued)}, nil, false)
	b.produce(t, 0, "slow")
	require.Eventually(t, func() bool { return b.h.attempts("slow") == 1 }, 20*time.Second, 5*time.Millisecond)
	b.produce(t, 0, "behind")
	b.produce(t, 1, "elsewhere")
	b.waitDone(t, "elsewhere")
	waitQueued(t, queued, "behind")
	require.Zero(t, b.h.attempts("behind"), "a partition's later record started before its earlier one finished")
	close(release)
	b.waitDone(t, "slow", "behind")
	order := b.h.handledOrder()
	require.Equal(t, []string{"elsewhere", "slow", "behind"}, order)
}

// A consumer with no dead-letter path (dead letters themselves have nowhere
// safer to go) never drops a record: one given up on is left undone, its
// partition rewound, and it is delivered again, ahead of the records after
// it on its partition.
func TestWithoutADeadLetterPathARecordGivenUpOnIsRedelivered(t *testing.T) {
	t.Parallel()
	b := newHarness(t, map[string]func(int) error{
		"refused": func(n int) error {
			if n < 3 {
				return errclass.AsPermanent(fmt.Errorf("refused, delivery %d", n))
			}
			return nil
		},
	})
	b.start(t, consumer.Config{Order: consumer.PerPartition}, nil, true)
	b.produce(t, 0, "refused")
	b.produce(t, 0, "next")
	b.waitDone(t, "refused", "next")
	require.Equal(t, 3, b.h.attempts("refused"))
	require.Equal(t, []string{"refused", "next"}, b.h.handledOrder(), "a later record ran ahead of the undone one")
	require.Equal(t, 1, b.h.timesHandled("next"))
	require.Eventually(t, func() bool { return b.committed(t, 0) == 2 }, 10*time.Second, 20*time.Millisecond)
	require.Empty(t, kafkatest.ReadAll(t, b.kafka, kafkax.DLQTopic(topic), 1, 200*time.Millisecond))
}

// flaky fails its first n dead-letter writes, then publishes.
type flaky struct {
	fails atomic.Int32
	next  consumer.DeadLetterer
}

func (f *flaky) DeadLetter(ctx context.Context, r *kgo.Record, fl dlq.Failure) error {
	if f.fails.Add(-1) >= 0 {
		return errors.New("kafka refuses the dead letter")
	}
	return f.next.DeadLetter(ctx, r, fl)
}

// A dead letter that cannot be written within the bound leaves its record
// undone and uncommitted: it is redelivered, handled again and then
// dead-lettered, never committed without its letter.
func TestADeadLetterThatCannotBeWrittenLeavesTheRecordUndone(t *testing.T) {
	t.Parallel()
	b := newHarness(t, map[string]func(int) error{
		"bad": func(int) error { return errclass.AsPermanent(errors.New("refused")) },
	})
	cl := kafkatest.NewClient(t, b.kafka)
	letters := &flaky{next: consumer.Publish{Client: cl, Group: group}}
	letters.fails.Store(3)
	b.start(t, consumer.Config{RetryAttempts: 2}, letters, false)
	b.produce(t, 0, "bad")
	l := b.deadLetters(t, 1)[0]
	require.Equal(t, "bad", l.PartitionKey)
	require.GreaterOrEqual(t, b.h.attempts("bad"), 2, "the record was not redelivered after its letter failed")
	require.Eventually(t, func() bool { return b.committed(t, 0) == 1 }, 10*time.Second, 20*time.Millisecond)
}

// While a topic's dead letters cannot be written, the process exports it
// as a condition (aegis_consumer_dead_letter_publish_failing{topic} = 1:
// AegisDeadLetterPublishFailing pages on it) besides the ALERT line; once a
// letter is written the gauge is 0 and the page resolves.
func TestADeadLetterWriteGivenUpOnIsAConditionUntilOneIsWritten(t *testing.T) {
	t.Parallel()
	b := newHarness(t, map[string]func(int) error{
		"bad": func(int) error { return errclass.AsPermanent(errors.New("refused")) },
	})
	cl := kafkatest.NewClient(t, b.kafka)
	letters := &flaky{next: consumer.Publish{Client: cl, Group: group}}
	letters.fails.Store(1 << 30)
	b.start(t, consumer.Config{RetryAttempts: 2}, letters, false)
	failing := func() float64 {
		families, err := b.reg.Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() != consumer.MetricDeadLetterPublishFailing {
				continue
			}
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == topic {
					return m.GetGauge().GetValue()
				}
			}
		}
		return -1
	}
	b.produce(t, 0, "bad")
	require.Eventually(t, func() bool { return failing() == 1 }, 10*time.Second, 10*time.Millisecond, "the condition is exported")
	letters.fails.Store(0)
	b.deadLetters(t, 1)
	require.Eventually(t, func() bool { return failing() == 0 }, 10*time.Second, 10*time.Millisecond, "written: it resolves")
}

// A member that joins while records keep coming gets its partitions only
// after the first member finished and committed what it had: every record
// is handled once, none is lost or applied twice across the rebalance.
func TestARebalanceCommitsWhatIsDoneBeforePartitionsMove(t *testing.T) {
	t.Parallel()
	b := newHarness(t, nil)
	cfg := consumer.Config{Concurrency: 2, MaxPollRecords: 5, Window: 500 * time.Millisecond}
	slow := func(ctx context.Context, r *kgo.Record) error {
		time.Sleep(20 * time.Millisecond) // wall time: records still in flight when the group rebalances are the case under test
		return b.h.handle(ctx, r)
	}
	b.startWith(t, cfg, nil, false, slow)
	var second atomic.Int32
	joined := false
	var keys []string
	perPartition := map[int32]int64{}
	deadline := time.Now().Add(30 * time.Second)
	// Records keep coming until the second member handled some of them.
	for i := 0; second.Load() == 0; i++ {
		require.True(t, time.Now().Before(deadline), "the second member never got a partition")
		p := int32(i % kafkatest.Partitions)
		k := fmt.Sprintf("r%04d", i)
		b.produce(t, p, k)
		keys, perPartition[p] = append(keys, k), perPartition[p]+1
		if !joined && len(b.h.handledOrder()) >= 10 {
			joined = true
			b.startWith(t, cfg, nil, false, func(ctx context.Context, r *kgo.Record) error {
				second.Add(1)
				return slow(ctx, r)
			})
		}
		// Records keep coming as fast as they are handled, at most a
		// poll's worth ahead of the handlers.
		require.Eventually(t, func() bool { return len(b.h.handledOrder()) >= i-cfg.MaxPollRecords }, 20*time.Second,
			time.Millisecond, "the members stopped handling records")
	}
	b.waitDone(t, keys...)
	for _, k := range keys {
		require.Equal(t, 1, b.h.timesHandled(k), "%s handled twice across the rebalance", k)
	}
	for p, n := range perPartition {
		require.Eventually(t, func() bool { return b.committed(t, p) == n }, 20*time.Second, 20*time.Millisecond, "partition %d", p)
	}
}

// On shutdown a record in flight finishes within Grace and is committed
// with what was done before it; with no grace it is abandoned uncommitted,
// for the next member to deliver again.
func TestShutdownCommitsWhatFinishedWithinGrace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		grace     time.Duration
		committed int64
	}{
		{"finishes within grace", 5 * time.Second, 2},
		{"abandoned without grace", time.Nanosecond, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newHarness(t, nil)
			b.h.work["slow"] = 500 * time.Millisecond
			stop := b.start(t, consumer.Config{Grace: tc.grace, Order: consumer.PerPartition}, nil, false)
			b.produce(t, 0, "first")
			b.waitDone(t, "first")
			b.produce(t, 0, "slow")
			require.Eventually(t, func() bool { return b.h.attempts("slow") == 1 }, 10*time.Second, 5*time.Millisecond)
			stop()
			require.Equal(t, tc.committed, b.committed(t, 0))
		})
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	live := context.Background()
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want errclass.Class
	}{
		{"success", live, nil, ""},
		{"explicit permanent", live, errclass.AsPermanent(errors.New("x")), errclass.Permanent},
		{"explicit poison", live, errclass.AsPoison(errors.New("x")), errclass.Poison},
		{"explicit transient beats a refusal", live, errclass.AsTransient(&pgconn.PgError{Code: database.CodeCheckViolation}), errclass.Transient},
		{"cancelled while running", live, context.Canceled, errclass.Transient},
		{"cancelled while stopping", stopped, context.Canceled, errclass.Canceled},
		{"connection failure", live, &pgconn.PgError{Code: database.CodeConnectionFailure}, errclass.Transient},
		{"serialization failure", live, &pgconn.PgError{Code: database.CodeSerializationFailure}, errclass.Transient},
		{"duplicate", live, &pgconn.PgError{Code: database.CodeUniqueViolation}, errclass.Transient},
		{"out of range", live, &pgconn.PgError{Code: database.CodeNumericOutOfRange}, errclass.Permanent},
		{"check violation", live, fmt.Errorf("credit: %w", &pgconn.PgError{Code: database.CodeCheckViolation}), errclass.Permanent},
		{"unclassified", live, errors.New("what"), errclass.Transient},
	} {
		require.Equal(t, tc.want, consumer.Classify(tc.ctx, tc.err), tc.name)
	}
}

// With LeaveQueued the end of a window (here: shutdown, with grace to
// spare) lets only the record in hand finish; those queued behind it are
// not started and stay uncommitted, for whoever owns the partition next.
// Without it the queue is handled first.
func TestLeaveQueuedStartsNothingAfterTheWindowEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		leaveQueued bool
		committed   int64
	}{
		{"queued records left", true, 1},
		{"queued records handled", false, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newHarness(t, nil)
			b.h.work["slow"] = 500 * time.Millisecond
			for _, k := range []string{"slow", "q1", "q2", "q3"} {
				b.produce(t, 0, k) // before the loop starts: one poll takes them all
			}
			stop := b.start(t, consumer.Config{Grace: 10 * time.Second, Order: consumer.PerPartition, LeaveQueued: tc.leaveQueued}, nil, false)
			require.Eventually(t, func() bool { return b.h.attempts("slow") == 1 }, 10*time.Second, 5*time.Millisecond)
			stop()
			require.Equal(t, tc.committed, b.committed(t, 0))
			require.Equal(t, int(tc.committed)-1, b.h.attempts("q3")+b.h.attempts("q2")+b.h.attempts("q1"))
		})
	}
}

// A user's credit (aegis.webhook.pending) and the payout command accepted
// after it (aegis.transactions) share the user's key but not a partition:
// the command must not start while the credit is still being handled, or
// its hold misses the credit that is being applied (services/payout-worker's
// payout/order.go). Two partitions of one topic stand for the two topics:
// the window keys its queues by the Kafka key alone.
func TestAKeysRecordsOnTwoPartitionsAreHandledOneAtATime(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	b := newHarness(t, map[string]func(int) error{
		"user": func(n int) error {
			if n == 1 {
				<-release
			}
			return nil
		},
	})
	b.start(t, consumer.Config{}, nil, false)
	// After start's: cleanups run last first, so the handler is released
	// before the loop is stopped.
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})

	b.produce(t, 0, "user") // the credit, held in its handler
	require.Eventually(t, func() bool { return b.h.attempts("user") == 1 }, 20*time.Second, 5*time.Millisecond)
	b.produce(t, 1, "user") // the payout command, on another partition
	// A record after it on its partition: once it is handled, the command
	// was polled and dispatched.
	b.produce(t, 1, "k1")
	b.waitDone(t, "k1")
	require.Equal(t, 1, b.h.attempts("user"), "the key's record on another partition started while its earlier one was in flight")

	close(release)
	require.Eventually(t, func() bool { return b.h.attempts("user") == 2 }, 20*time.Second, 5*time.Millisecond,
		"the key's second record handled once the first is done")
}

// With LeaveQueued a window shorter than one record still starts the first
// record of each partition with a free slot: every window moves the
// partition on by at least one record, so a window that ends at once
// delivers everything, in order, without rewinding more than once per
// record.
func TestLeaveQueuedWithAWindowShorterThanARecordStillMovesOn(t *testing.T) {
	t.Parallel()
	b := newHarness(t, nil)
	keys := []string{"r1", "r2", "r3", "r4", "r5"}
	for _, k := range keys {
		b.produce(t, 0, k)
	}
	var rewinds counting
	b.logger = slog.New(&rewinds)
	b.start(t, consumer.Config{Order: consumer.PerPartition, LeaveQueued: true, Window: time.Nanosecond}, nil, false)
	b.waitDone(t, keys...)
	require.Equal(t, keys, b.h.handledOrder())
	require.LessOrEqual(t, rewinds.count("record left undone; its partition is rewound to redeliver it"), len(keys)-1,
		"a window started nothing")
}
