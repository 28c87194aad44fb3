package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/proctest"
)

type relayRig struct {
	t       *testing.T
	db      *pgtest.DB
	relay   string
	kafka   string
	brokers string
	kport   int
	dataDir string
}

func newRelayRig(t *testing.T) *relayRig {
	t.Helper()
	bin := binaries(t)
	r := &relayRig{t: t, db: pgtest.New(t),
		relay: filepath.Join(bin, "outbox-relay"),
		kafka: filepath.Join(bin, "aegis-kafka"),
		kport: proctest.FreePort(t), dataDir: t.TempDir()}
	r.brokers = proctest.Addr(r.kport)
	return r
}

func (r *relayRig) startKafka() *proctest.Proc {
	r.t.Helper()
	p := proctest.Start(r.t, "kafka", r.kafka, map[string]string{
		"KAFKA_PORT": strconv.Itoa(r.kport), "KAFKA_DATA_DIR": r.dataDir, "KAFKA_PARTITIONS": "3"})
	require.Eventually(r.t, func() bool {
		cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokers))
		if err != nil {
			return false
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return cl.Ping(ctx) == nil
	}, 30*time.Second, 50*time.Millisecond, "kafka up")
	return p
}

func (r *relayRig) startRelay(name string, env map[string]string) *proctest.Proc {
	r.t.Helper()
	port := proctest.FreePort(r.t)
	all := map[string]string{"DATABASE_URL": r.db.URL, "KAFKA_BROKERS": r.brokers, "HTTP_ADDR": proctest.Addr(port),
		"LOG_LEVEL": "warn", "RELAY_POLL_INTERVAL": "50ms"}
	for k, v := range env {
		all[k] = v
	}
	p := proctest.Start(r.t, name, r.relay, all)
	proctest.WaitHTTP(r.t, fmt.Sprintf("http://%s/healthz", proctest.Addr(port)), 30*time.Second, p)
	return p
}

func (r *relayRig) insert(from, to int) {
	r.t.Helper()
	_, err := r.db.Pool.Exec(context.Background(), `
		INSERT INTO transaction_outbox (topic, event_type, partition_key, payload, headers, correlation_id)
		SELECT 'aegis.webhook.pending', 'test', 'user-' || (i % 50), jsonb_build_object('i', i), '{}', 'c'
		FROM generate_series($1::int, $2::int - 1) i`, from, to)
	require.NoError(r.t, err)
}

func (r *relayRig) count(q string) int {
	r.t.Helper()
	var n int
	require.NoError(r.t, r.db.Pool.QueryRow(context.Background(), q).Scan(&n))
	return n
}

// onKafka returns the distinct payload numbers on aegis.webhook.pending.
func (r *relayRig) onKafka(want int) map[int]bool {
	r.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokers), kgo.ConsumeTopics(kafkax.TopicWebhookPending),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(r.t, err)
	defer cl.Close()
	seen := map[int]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(seen) < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
			var p struct {
				I int `json:"i"`
			}
			if json.Unmarshal(rec.Value, &p) == nil {
				seen[p.I] = true
			}
		})
	}
	return seen
}

func TestRelayKilledMidBatchLosesNothing(t *testing.T) {
	t.Parallel()
	r := newRelayRig(t)
	r.startKafka()
	const n = 20000
	r.insert(0, n)
	first := r.startRelay("relay-1", map[string]string{"RELAY_LEASE": "4s", "RELAY_PUBLISH_TIMEOUT": "2s", "RELAY_BATCH_SIZE": "200"})
	require.Eventually(t, func() bool {
		return r.count(`SELECT count(*) FROM transaction_outbox`) < n // published rows are deleted
	}, 30*time.Second, 5*time.Millisecond)
	first.Kill() // mid-batch: rows it claimed stay 'processing' until their lease ends
	left := r.count(`SELECT count(*) FROM transaction_outbox`)
	require.Greater(t, left, 0, "the relay died with work left")

	r.startRelay("relay-2", map[string]string{"RELAY_LEASE": "4s", "RELAY_PUBLISH_TIMEOUT": "2s"})
	require.Eventually(t, func() bool {
		return r.count(`SELECT count(*) FROM transaction_outbox`) == 0
	}, 90*time.Second, 50*time.Millisecond, "the survivor takes over the dead relay's rows after their lease")
	seen := r.onKafka(n)
	require.Len(t, seen, n, "every committed row reached Kafka")
}

func TestKafkaOutageLosesNothingAndSpendsBoundedRetries(t *testing.T) {
	t.Parallel()
	r := newRelayRig(t)
	kafka := r.startKafka()
	env := map[string]string{"RELAY_PUBLISH_TIMEOUT": "1s", "RELAY_LEASE": "3s", "RELAY_BACKOFF_BASE": "200ms",
		"RELAY_BACKOFF_MAX": "1s", "BREAKER_FAILURES": "3", "BREAKER_OPEN_FOR": "2s"}
	relay := r.startRelay("relay", env)
	r.insert(0, 500)
	require.Eventually(t, func() bool {
		return r.count(`SELECT count(*) FROM transaction_outbox`) == 0 // published rows are deleted
	}, 30*time.Second, 20*time.Millisecond)

	// Kafka goes away; the writers keep committing.
	require.NoError(t, kafka.Stop(t, 10*time.Second))
	r.insert(500, 1000)
	require.Eventually(t, func() bool {
		return r.count(`SELECT count(*) FROM transaction_outbox WHERE retry_count > 0`) > 0
	}, 30*time.Second, 50*time.Millisecond, "publishing fails and is retried")
	require.Eventually(t, func() bool {
		for _, l := range relay.Lines() {
			if strings.Contains(l, "circuit breaker state changed") && strings.Contains(l, `"to":"open"`) {
				return true
			}
		}
		return false
	}, 60*time.Second, 50*time.Millisecond, "the breaker never opened")

	// Read while the rows wait: a row is deleted once it is published, its
	// retry history with it.
	require.Zero(t, r.count(`SELECT count(*) FROM transaction_outbox WHERE retry_count > max_retries`))
	require.Positive(t, r.count(`SELECT count(*) FROM transaction_outbox WHERE jsonb_array_length(retry_history) > 0`),
		"the failed attempts are recorded")

	r.startKafka() // same port, same data directory
	require.Eventually(t, func() bool {
		return r.count(`SELECT count(*) FROM transaction_outbox`) == 0
	}, 90*time.Second, 50*time.Millisecond, "the backlog drains once Kafka is back")
	require.Zero(t, r.count(`SELECT count(*) FROM dead_letters`), "a short outage dead-letters nothing")
	seen := r.onKafka(1000)
	require.Len(t, seen, 1000, "records from before, during and after the outage are all on Kafka")
}
