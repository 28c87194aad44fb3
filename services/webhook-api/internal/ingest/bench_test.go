package ingest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
)

// BenchmarkSaveGroup commits groups of 16 fresh credits (the one round trip
// path), and of 16 with a problem (the general path, dead-lettered), each
// event a new key: the cost of webhook_events' insert and its dedupe.
func BenchmarkSaveGroup(b *testing.B) {
	for _, path := range []string{"one-round-trip", "general"} {
		b.Run(path, func(b *testing.B) {
			db := pgtest.New(b)
			ctx := context.Background()
			store := ingest.NewStore(db.Pool, noNotify{}, time.Now)
			const group = 16
			n := 0
			b.ResetTimer()
			for b.Loop() {
				g := make([]ingest.Pending, group)
				for i := range g {
					n++
					g[i] = credit(fmt.Sprintf("evt_bench_%d", n), fmt.Sprintf("pi_bench_%d", n), 0)
					if path == "general" {
						g[i].Event.Problem = "metadata.user_id is missing"
					}
				}
				for _, s := range store.SaveGroup(ctx, g) {
					if s.Err != nil {
						b.Fatal(s.Err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(n), "µs/event")
		})
	}
}
