package kafkax_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/kafkax"
)

func TestEnsureTopicsIsIdempotent(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	require.NoError(t, err)
	defer c.Close()
	cl, err := kafkax.NewClient(c.ListenAddrs(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	require.NoError(t, kafkax.EnsureTopics(ctx, cl, 3, kafkax.AllTopics()...))
	require.NoError(t, kafkax.EnsureTopics(ctx, cl, 3, kafkax.AllTopics()...), "second run must accept existing topics")
	require.NoError(t, kafkax.Ping(cl)(ctx))
	require.Len(t, kafkax.AllTopics(), 7)
	require.Equal(t, "aegis.transactions.dlq", kafkax.DLQTopic(kafkax.TopicTransactions))

	_, err = kafkax.NewClient(nil, slog.Default())
	require.ErrorContains(t, err, "KAFKA_BROKERS")
}

func TestHeaders(t *testing.T) {
	t.Parallel()
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "a", Value: []byte("2")}}}
	require.Equal(t, "2", kafkax.Header(r, "a"))
	kafkax.SetHeader(r, "a", "3")
	require.Len(t, r.Headers, 1)
	require.Equal(t, "3", kafkax.Header(r, "a"))
	require.Equal(t, "", kafkax.Header(r, "missing"))
}
