package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/localkafka"
)

// Partitions is how many partitions each seeded topic has.
const Partitions = 3

// NewCluster starts a kfake cluster with every Aegis topic and closes it when
// t ends. It is localkafka's cluster, the one `make dev` and the chaos suite
// run: dead group members expire after their session timeout as in Apache
// Kafka (see docs/kfake.md).
func NewCluster(t testing.TB, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	base := []kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(Partitions, kafkax.AllTopics()...)}
	c, err := localkafka.New(localkafka.Config{}, append(base, opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: start kafka: %v", err)
	}
	t.Cleanup(c.Close)
	return c.Cluster
}

// NewClient returns a client on c, closed when t ends.
func NewClient(t testing.TB, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatalf("kafkatest: client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// ReadAll reads topic from the start until n records arrived or timeout
// passed, and returns what it got.
func ReadAll(t testing.TB, c *kfake.Cluster, topic string, n int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	cl := NewClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}
