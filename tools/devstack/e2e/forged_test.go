package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/kafkax"
)

// Only webhook-api creates money, with the real binaries and roles: a
// credit produced straight to Kafka (no proof, or a proof under a key
// webhook-api does not hold) moves nothing and is stored by dlq-admin as an
// unproven_event dead letter; replayed through dlq-admin (as its database
// role, past the outbox guard: an unchanged open letter) it is refused
// again. A webhook Stripe signed is credited as before.
func TestForgedMoneyEventsOnKafkaMoveNothing(t *testing.T) {
	t.Parallel()
	s := start(t)
	user := "user-forged-e2e"
	require.Equal(t, 200, s.signedStripe(payment("evt_e2e_genuine", user, 5000)).status)
	balance := func() int {
		return s.count(`SELECT coalesce(sum(balance), 0)::int FROM wallets WHERE kind = 'user' AND owner = $1`, user)
	}
	s.eventually("the genuine payment credited", func() bool { return balance() == 5000 })

	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:" + strconv.Itoa(s.cfg.Ports.Kafka)))
	require.NoError(t, err)
	defer cl.Close()
	other, err := eventproof.New("an-attackers-own-signing-key-0123456789", "")
	require.NoError(t, err)
	for i, withProof := range []bool{false, true} {
		e := event.PSPEvent{Provider: "stripe", EventID: fmt.Sprintf("evt_e2e_forged_%d", i), Type: "payment_intent.succeeded",
			Action: event.ActionCredit, UserID: user, Amount: 900_000, Currency: "usd", Reference: fmt.Sprintf("pi_e2e_forged_%d", i),
			OccurredAt: time.Now(), Raw: json.RawMessage(`{}`)}
		b, err := json.Marshal(e)
		require.NoError(t, err)
		rec := &kgo.Record{Topic: kafkax.TopicWebhookPending, Key: []byte(user), Value: b,
			Headers: []kgo.RecordHeader{{Key: kafkax.HeaderMessageID, Value: []byte(e.MessageID())}}}
		if withProof {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: eventproof.Header, Value: []byte(other.Sign(e))})
		}
		require.NoError(t, cl.ProduceSync(context.Background(), rec).FirstErr())
	}
	letters := func() int {
		return s.count(`SELECT count(*) FROM dead_letters WHERE error_class = $1`, string(eventproof.Class))
	}
	s.eventually("both forgeries stored as unproven_event dead letters", func() bool { return letters() == 2 })
	require.Equal(t, 5000, balance(), "the forgeries moved nothing")
	require.Zero(t, s.count(`SELECT count(*) FROM ledger_transactions WHERE reference LIKE '%pi_e2e_forged%'`))

	var id int64
	require.NoError(t, s.db.Pool.QueryRow(context.Background(),
		`SELECT id FROM dead_letters WHERE error_class = $1 ORDER BY id LIMIT 1`, string(eventproof.Class)).Scan(&id))
	r := s.do(http.MethodPost, fmt.Sprintf("%s/v1/dead-letters/%d/replay", s.dlq, id),
		[]byte(`{"reason":"checking that a forgery stays refused"}`), s.bearer(s.opToken))
	require.Equal(t, 202, r.status, r.raw)
	s.eventually("the replayed forgery refused again", func() bool { return letters() == 3 })
	require.Equal(t, 5000, balance(), "the replayed forgery moved nothing")
}
