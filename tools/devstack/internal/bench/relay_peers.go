package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/kafkax"
)

// The peers drain the same backlog as the relay (drainRows rows of 1 KiB
// over drainKeys keys, the record keyed by its partition key) into the same
// kfake, each into a topic of its own, one after the other in the same run:
// the machine is shared and noisy, so only ratios within one run mean much.

// peerPayload is the relay backlog's payload, byte for byte.
func peerPayload(i int) []byte {
	return fmt.Appendf(nil, `{"i": %d, "pad": "%s"}`, i, pad1000)
}

var pad1000 = strings.Repeat("x", 1000)

const (
	watermillTopic    = "bench_watermill"
	watermillKeyField = "partition_key"
)

// watermillForwarder measures Watermill v1.5's components/forwarder over
// watermill-sql's default Postgres schema and offsets adapter, publishing
// to kfake with franz-go (kgoPublisher), at each subscriber batch size. The
// backlog is written once through the forwarder's own publisher (enveloped,
// as an application would); each batch size reads it as its own consumer
// group, so every run drains the same rows from the start.
func (r *Runner) watermillForwarder(ctx context.Context, pool *pgxpool.Pool, brokers string, batchSizes []int) ([]peerRate, error) {
	logger := watermill.NopLogger{}
	db := wmsql.BeginnerFromPgx(pool)
	schema := wmsql.DefaultPostgreSQLSchema{}
	sqlPub, err := wmsql.NewPublisher(db, wmsql.PublisherConfig{SchemaAdapter: schema, AutoInitializeSchema: true}, logger)
	if err != nil {
		return nil, fmt.Errorf("watermill sql publisher: %w", err)
	}
	pub := forwarder.NewPublisher(sqlPub, forwarder.PublisherConfig{ForwarderTopic: watermillTopic})
	r.progress("relay peers: writing the %dk-row backlog through Watermill's forwarder publisher", drainRows/1000)
	const chunk = 1000
	for start := 0; start < drainRows; start += chunk {
		msgs := make([]*message.Message, 0, chunk)
		for i := start + 1; i <= start+chunk; i++ {
			m := message.NewMessage(watermill.NewUUID(), peerPayload(i))
			m.Metadata.Set(watermillKeyField, "user-"+strconv.Itoa(i%drainKeys))
			m.Metadata.Set("event_type", "bench")
			msgs = append(msgs, m)
		}
		// Each run publishes to a topic of its own (kgoPublisher.topic).
		if err := pub.Publish("bench.peer.watermill", msgs...); err != nil {
			return nil, fmt.Errorf("watermill backlog: %w", err)
		}
	}
	var rates []peerRate
	for _, batch := range batchSizes {
		rate, err := r.watermillDrain(ctx, db, brokers, batch)
		if err != nil {
			return nil, err
		}
		rates = append(rates, rate)
	}
	return rates, nil
}

func (r *Runner) watermillDrain(ctx context.Context, db wmsql.Beginner, brokers string, batch int) (peerRate, error) {
	dest := "bench.peer.watermill." + strconv.Itoa(batch)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers),
		// A synchronous publisher, as watermill-kafka's (a Sarama
		// SyncProducer, which does not linger): each message waits for
		// its ack before the forwarder acks it and takes the next.
		kgo.ProducerLinger(0))
	if err != nil {
		return peerRate{}, err
	}
	defer cl.Close()
	if err := kafkax.EnsureTopics(ctx, cl, partitions, dest); err != nil {
		return peerRate{}, err
	}
	logger := watermill.NopLogger{}
	sub, err := wmsql.NewSubscriber(db, wmsql.SubscriberConfig{
		ConsumerGroup:    "batch_" + strconv.Itoa(batch),
		SchemaAdapter:    wmsql.DefaultPostgreSQLSchema{SubscribeBatchSize: batch},
		OffsetsAdapter:   wmsql.DefaultPostgreSQLOffsetsAdapter{},
		InitializeSchema: true,
	}, logger)
	if err != nil {
		return peerRate{}, fmt.Errorf("watermill sql subscriber: %w", err)
	}
	defer sub.Close()
	fwd, err := forwarder.NewForwarder(sub, kgoPublisher{cl: cl, topic: dest}, logger, forwarder.Config{ForwarderTopic: watermillTopic})
	if err != nil {
		return peerRate{}, fmt.Errorf("watermill forwarder: %w", err)
	}
	r.progress("relay peers: Watermill forwarder, subscriber batch %d", batch)
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	runErr := make(chan error, 1)
	start := time.Now()
	go func() { runErr <- fwd.Run(fctx) }()
	got, took, err := waitOnKafka(ctx, cl, dest, drainRows, start, runErr)
	_ = fwd.Close()
	if err != nil {
		return peerRate{}, fmt.Errorf("watermill forwarder (batch %d): %w", batch, err)
	}
	return peerRate{rows: got, took: took}, nil
}

// peerBudget bounds each peer's run: a peer far slower than the relay on a
// busy machine would otherwise hold the bench for many minutes. A peer
// that does not finish in it is measured on the rows it moved (its rate is
// steady: each row costs it the same), and the row says so.
const peerBudget = 60 * time.Second

// peerRate is what a peer moved and in how long.
type peerRate struct {
	rows int64
	took time.Duration
}

func (p peerRate) perSecond() float64 { return float64(p.rows) / p.took.Seconds() }

func (p peerRate) String() string {
	s := fmt.Sprintf("%.0f rows/s", p.perSecond())
	if p.rows < drainRows {
		s += fmt.Sprintf(" (%dk of %dk rows in %.0f s)", p.rows/1000, drainRows/1000, p.took.Seconds())
	} else {
		s += fmt.Sprintf(" (%.1f s)", p.took.Seconds())
	}
	return s
}

// kgoPublisher is a Watermill message.Publisher on franz-go: the record is
// keyed by the message's partition_key metadata, the rest of the metadata
// goes into headers, and Publish returns when Kafka has acked every message.
type kgoPublisher struct {
	cl    *kgo.Client
	topic string // every message goes here, whatever the envelope says: the run's own topic
}

func (p kgoPublisher) Publish(_ string, msgs ...*message.Message) error {
	recs := make([]*kgo.Record, 0, len(msgs))
	for _, m := range msgs {
		rec := &kgo.Record{Topic: p.topic, Key: []byte(m.Metadata.Get(watermillKeyField)), Value: m.Payload}
		for k, v := range m.Metadata {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
		recs = append(recs, rec)
	}
	return p.cl.ProduceSync(context.Background(), recs...).FirstErr()
}

func (p kgoPublisher) Close() error { return nil }

// waitOnKafka waits until topic holds want records, or peerBudget has
// passed since start, and reports how many it holds and when; done ends the
// wait early with the drainer's error.
func waitOnKafka(ctx context.Context, cl *kgo.Client, topic string, want int64, start time.Time, done <-chan error) (int64, time.Duration, error) {
	adm := kadm.NewClient(cl)
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return 0, 0, err
		}
		var total int64
		ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
		if took := time.Since(start); total >= want || took > peerBudget {
			return total, took, nil
		}
		select {
		case err := <-done:
			return 0, 0, fmt.Errorf("stopped with %d of %d records on %s: %w", total, want, topic, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

const naiveBatch, naiveWorkers = 1000, 2

// naiveLoop measures the textbook outbox relay: in one transaction, SELECT
// … ORDER BY id LIMIT n FOR UPDATE SKIP LOCKED, produce every row and wait
// for the acks, DELETE them, COMMIT; two such loops (the relay's default
// worker count). It keeps no per-key order across its loops, no retry
// bookkeeping and no dead letters: what those cost the relay is the gap.
func (r *Runner) naiveLoop(ctx context.Context, pool *pgxpool.Pool, brokers string) (peerRate, error) {
	const topic = "bench.peer.naive"
	if _, err := pool.Exec(ctx, `
		CREATE TABLE bench_naive_outbox (id bigserial PRIMARY KEY, partition_key text NOT NULL, payload jsonb NOT NULL);
		INSERT INTO bench_naive_outbox (partition_key, payload)
		SELECT 'user-' || (i % `+strconv.Itoa(drainKeys)+`), jsonb_build_object('i', i, 'pad', repeat('x', 1000))
		FROM generate_series(1, `+strconv.Itoa(drainRows)+`) i;
		ANALYZE bench_naive_outbox`); err != nil {
		return peerRate{}, fmt.Errorf("naive backlog: %w", err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(4*naiveBatch))
	if err != nil {
		return peerRate{}, err
	}
	defer cl.Close()
	if err := kafkax.EnsureTopics(ctx, cl, partitions, topic); err != nil {
		return peerRate{}, err
	}
	r.progress("relay peers: naive SKIP LOCKED loop, batch %d, %d loops", naiveBatch, naiveWorkers)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, naiveWorkers)
	moved := make([]int64, naiveWorkers)
	for w := range naiveWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(start) < peerBudget {
				n, err := naiveCycle(ctx, pool, cl, topic)
				if err != nil {
					errs[w] = err
					return
				}
				if n == 0 {
					return
				}
				moved[w] += int64(n)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return peerRate{}, fmt.Errorf("naive loop: %w", err)
	}
	total := moved[0] + moved[1]
	if err := checkTopic(ctx, cl, topic, total); err != nil {
		return peerRate{}, err
	}
	return peerRate{rows: total, took: took}, nil
}

func naiveCycle(ctx context.Context, pool *pgxpool.Pool, cl *kgo.Client, topic string) (int, error) {
	var n int
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT id, partition_key, payload FROM bench_naive_outbox ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`, naiveBatch)
		if err != nil {
			return err
		}
		var ids []int64
		var recs []*kgo.Record
		for rows.Next() {
			var id int64
			var key string
			var payload []byte
			if err := rows.Scan(&id, &key, &payload); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(key), Value: payload})
		}
		if err := rows.Err(); err != nil {
			return err
		}
		n = len(ids)
		if n == 0 {
			return nil
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM bench_naive_outbox WHERE id = ANY($1)`, ids)
		return err
	})
	return n, err
}

func checkTopic(ctx context.Context, cl *kgo.Client, topic string, want int64) error {
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total < want {
		return fmt.Errorf("only %d of %d records reached %s", total, want, topic)
	}
	return nil
}
