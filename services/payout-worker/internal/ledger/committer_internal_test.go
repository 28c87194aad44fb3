package ledger

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// groupCredit is one credit of a group handed to commit directly, so that
// the test decides exactly which credits share a transaction.
type groupCredit struct {
	event, reference, user string
	amount                 int64
}

// commitGroupOf commits credits as one group and returns each one's result,
// in the order given.
func commitGroupOf(t *testing.T, c *CreditCommitter, credits []groupCredit) []creditResult {
	t.Helper()
	ctx := context.Background()
	group := make([]*creditRequest, len(credits))
	for i, g := range credits {
		cr, err := c.ledger.newCredit(ctx, Claim{Group: "g", EventID: g.event}, Receipt{Provider: "stripe", Reference: g.reference, UserID: g.user, Amount: g.amount, Currency: "usd"})
		require.NoError(t, err)
		group[i] = &creditRequest{cr: cr, done: make(chan creditResult, 1)}
	}
	answers := append([]*creditRequest(nil), group...) // commit sorts group
	c.commit(ctx, group)
	results := make([]creditResult, len(answers))
	for i, r := range answers {
		select {
		case results[i] = <-r.done:
		default:
			t.Fatalf("credit %d was not answered", i)
		}
	}
	return results
}

func newTestCommitter(t *testing.T, delay time.Duration) (*pgtest.DB, *CreditCommitter) {
	t.Helper()
	db := pgtest.New(t)
	c, err := NewCreditCommitter(New(db.Pool).WithSettlementDelay(delay), db.Pool, CreditCommitterConfig{Workers: 1}, lifecycle.Deps{})
	require.NoError(t, err)
	return db, c
}

func balanceOf(t *testing.T, db *pgtest.DB, user string) int64 {
	t.Helper()
	b, err := Balance(context.Background(), db.Pool, user, "usd")
	require.NoError(t, err)
	return b
}

func count(t *testing.T, db *pgtest.DB, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, db.Pool.QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

// The group's credits see each other as separate transactions would: a
// message delivered twice is a duplicate, a payment under a second event
// id is already credited, and two credits of one wallet both count; all in
// one database transaction.
func TestCreditGroupIsOneTransactionWithExactOutcomes(t *testing.T) {
	t.Parallel()
	for _, delay := range []time.Duration{0, time.Hour} {
		t.Run(delay.String(), func(t *testing.T) {
			t.Parallel()
			db, c := newTestCommitter(t, delay)
			results := commitGroupOf(t, c, []groupCredit{
				{"evt_b", "pi_b", "u-b", 7},
				{"evt_1", "pi_1", "u-a", 100},
				{"evt_1", "pi_1", "u-a", 100}, // redelivered
				{"evt_2", "pi_1", "u-a", 100}, // charge.succeeded of the same payment
				{"evt_3", "pi_2", "u-a", 50},  // a second payment into the same wallet
			})
			want := []CreditOutcome{Credited, Credited, DuplicateMessage, AlreadyCredited, Credited}
			for i, r := range results {
				require.NoError(t, r.err, "credit %d", i)
				require.Equal(t, want[i], r.outcome, "credit %d", i)
			}
			require.EqualValues(t, 150, balanceOf(t, db, "u-a"))
			require.EqualValues(t, 7, balanceOf(t, db, "u-b"))
			require.Equal(t, 3, count(t, db, `SELECT count(*) FROM ledger_transactions WHERE kind = 'credit'`))
			require.Equal(t, 6, count(t, db, `SELECT count(*) FROM ledger_entries`))
			require.Zero(t, count(t, db, `SELECT count(*) FROM processed_events`),
				"a credit's ledger transaction is its message's record")
			require.Equal(t, 2, count(t, db, `SELECT count(*) FROM ledger_transactions WHERE message_id = 'evt_1' OR message_id = 'evt_3'`))
			require.Equal(t, 1, count(t, db, `
				SELECT count(DISTINCT xmin::text) FROM (
					SELECT xmin FROM ledger_transactions UNION ALL SELECT xmin FROM ledger_entries UNION ALL SELECT xmin FROM wallets WHERE kind = 'user') x`),
				"the group committed as one transaction")
			require.Zero(t, testutil.ToFloat64(c.retried), "the group was not retried one by one")
			available := 0
			if delay > 0 {
				available = 3
			}
			require.Equal(t, available, count(t, db, `SELECT count(*) FROM credit_availability`))
		})
	}
}

// A credit Postgres refuses fails the group's transaction; the group is
// committed again one by one, and only that credit fails, with its own
// Postgres error.
func TestPoisonedCreditFailsAloneInItsGroup(t *testing.T) {
	t.Parallel()
	db, c := newTestCommitter(t, 0)
	ctx := context.Background()
	out, err := c.ledger.CreditOnce(ctx, db.Pool, Claim{Group: "g", EventID: "evt_0"}, Receipt{Provider: "stripe", Reference: "pi_0", UserID: "u-rich", Amount: 1, Currency: "usd"})
	require.NoError(t, err)
	require.Equal(t, Credited, out)

	results := commitGroupOf(t, c, []groupCredit{
		{"evt_1", "pi_1", "u-a", 100},
		{"evt_1", "pi_1", "u-a", 100},
		{"evt_2", "pi_1", "u-a", 100},
		{"evt_3", "pi_2", "u-a", 50},
		{"evt_x", "pi_x", "u-rich", math.MaxInt64}, // 1 + MaxInt64 overflows the balance
		{"evt_4", "pi_4", "u-z", 9},
	})
	want := []CreditOutcome{Credited, DuplicateMessage, AlreadyCredited, Credited, "", Credited}
	for i, r := range results {
		require.Equal(t, want[i], r.outcome, "credit %d", i)
		if i == 4 {
			require.Error(t, r.err)
			require.Equal(t, "22003", database.Code(r.err), "the pgconn error is wrapped: %v", r.err)
			continue
		}
		require.NoError(t, r.err, "credit %d", i)
	}
	require.EqualValues(t, 1, testutil.ToFloat64(c.retried), "the group failed and was retried one by one")
	require.EqualValues(t, 150, balanceOf(t, db, "u-a"))
	require.EqualValues(t, 1, balanceOf(t, db, "u-rich"))
	require.EqualValues(t, 9, balanceOf(t, db, "u-z"))
	require.Zero(t, count(t, db, `SELECT count(*) FROM ledger_transactions WHERE reference = 'stripe:pi_x'`))
	require.Zero(t, count(t, db, `SELECT count(*) FROM processed_events`),
		"the refused credit's message is not claimed (the consumer decides what becomes of it), nor is any posted one")
	require.Equal(t, 4, count(t, db, `SELECT count(*) FROM ledger_transactions WHERE kind = 'credit'`))
}
