package intake_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// BenchmarkIntake stores 5,000 distinct dead letters per iteration and
// reports the rate (letters/s), from the first poll to the last row.
//
//	go test -run '^$' -bench Intake -benchtime 1x ./services/dlq-admin/internal/deadletter/intake/
func BenchmarkIntake(b *testing.B) {
	const n = 5000
	for range b.N {
		b.StopTimer()
		cluster := kafkatest.NewCluster(b)
		db := pgtest.New(b)
		records := make([]*kgo.Record, n)
		for i := range records {
			l := consumerLetter()
			o := int64(i)
			l.OriginalOffset = &o
			r, err := l.Record()
			require.NoError(b, err)
			records[i] = r
		}
		cl := kafkatest.NewClient(b, cluster)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		require.NoError(b, cl.ProduceSync(ctx, records...).FirstErr())
		cancel()
		b.StartTimer()
		began := time.Now()
		c := start(b, cluster, db.Pool)
		require.Eventually(b, func() bool { return rows(b, db) >= n }, 2*time.Minute, 5*time.Millisecond)
		elapsed := time.Since(began)
		b.StopTimer()
		require.NoError(b, c.stop())
		b.ReportMetric(float64(n)/elapsed.Seconds(), "letters/s")
	}
}
