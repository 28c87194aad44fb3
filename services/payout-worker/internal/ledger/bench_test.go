package ledger_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
)

// The credit path's cost per credit in the package's own terms: one credit
// alone (one round trip), and credits committed in groups by concurrent
// callers, as the worker's consumer does. Compare runs with benchstat.

func BenchmarkCreditOnce(b *testing.B) {
	db := pgtest.New(b)
	l := ledger.New(db.Pool)
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		out, err := l.CreditOnce(ctx, db.Pool, ledger.Claim{Group: "bench", EventID: fmt.Sprintf("evt_%d", i)}, ledger.Receipt{Provider: "stripe", Reference: fmt.Sprintf("pi_%d", i), UserID: fmt.Sprintf("u%d", i%50), Amount: 100, Currency: "usd"})
		if err != nil || out != ledger.Credited {
			b.Fatalf("credit %d: %v %v", i, out, err)
		}
	}
}

func BenchmarkCreditCommitter(b *testing.B) {
	db := pgtest.New(b)
	c, err := ledger.NewCreditCommitter(ledger.New(db.Pool), db.Pool, ledger.CreditCommitterConfig{Workers: 2}, lifecycle.Deps{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Stop(ctx) }()
	var n atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			out, err := c.Credit(ctx, ledger.Claim{Group: "bench", EventID: fmt.Sprintf("evt_%d", i)}, ledger.Receipt{Provider: "stripe", Reference: fmt.Sprintf("pi_%d", i), UserID: fmt.Sprintf("u%d", i%50), Amount: 100, Currency: "usd"})
			if err != nil || out != ledger.Credited {
				b.Errorf("credit %d: %v %v", i, out, err)
				return
			}
		}
	})
}
