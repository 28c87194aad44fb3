package ingest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
)

type noNotify struct{}

func (noNotify) Notify()                     {}
func (noNotify) QueueNotify(*pgx.Batch) bool { return false }

var epoch = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// credit is a verified payment event about object ref, occurring at epoch+at.
func credit(eventID, ref string, at time.Duration) ingest.Pending {
	return ingest.Pending{
		Event: ingest.Normalized{Event: event.PSPEvent{
			Provider: ingest.Stripe, EventID: eventID, Type: "payment_intent.succeeded", Action: event.ActionCredit,
			UserID: "user-" + ref, Amount: 500, Currency: "usd", Reference: ref, ObjectStatus: "succeeded",
			OccurredAt: epoch.Add(at),
		}},
		Body:          []byte(fmt.Sprintf(`{"id":%q}`, eventID)),
		CorrelationID: "corr-" + eventID,
	}
}

func outcomes(t *testing.T, saved []ingest.Saved) []ingest.Outcome {
	t.Helper()
	out := make([]ingest.Outcome, len(saved))
	for i, s := range saved {
		require.NoError(t, s.Err, "webhook %d", i)
		out[i] = s.Outcome
	}
	return out
}

// One group can hold several events about one object (a PSP retry, or two
// event types for one payment): the newest wins psp_objects and the older
// ones are answered stale, as they would be one transaction apart.
func TestGroupAnswersEachEventFreshOrStaleAgainstTheNewest(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	store := ingest.NewStore(db.Pool, noNotify{}, time.Now)
	count := func(q string, args ...any) (n int) {
		require.NoError(t, db.Pool.QueryRow(ctx, q, args...).Scan(&n))
		return n
	}
	latest := func(ref string) (id string) {
		require.NoError(t, db.Pool.QueryRow(ctx, "SELECT event_id FROM psp_objects WHERE provider = 'stripe' AND object_id = $1", ref).Scan(&id))
		return id
	}
	none := ingest.Pending{
		Event: ingest.Normalized{Event: event.PSPEvent{Provider: ingest.Stripe, EventID: "evt_none", Type: "customer.created",
			Action: event.ActionNone, OccurredAt: epoch}},
		Body: []byte(`{"id":"evt_none"}`), CorrelationID: "corr-none",
	}

	got := store.SaveGroup(ctx, []ingest.Pending{
		credit("evt_old", "pi_1", 5*time.Second),
		credit("evt_new", "pi_1", 10*time.Second),
		credit("evt_older", "pi_1", time.Second),
		credit("evt_other", "pi_2", time.Second),
		none,
	})
	require.Equal(t, []ingest.Outcome{ingest.Stale, ingest.Accepted, ingest.Stale, ingest.Accepted, ingest.Accepted}, outcomes(t, got))
	require.Equal(t, "evt_new", latest("pi_1"))
	require.Equal(t, "evt_other", latest("pi_2"))
	require.Equal(t, 5, count("SELECT count(*) FROM webhook_events"), "stale events are stored for the record")
	require.Equal(t, 5, count("SELECT count(*) FROM transaction_outbox"), "and published")
	require.Equal(t, 3, count("SELECT count(*) FROM transaction_outbox WHERE partition_key = 'user-pi_1'"), "keyed by wallet")

	// Later groups are compared with what the earlier ones stored; a tie is
	// not stale.
	got = store.SaveGroup(ctx, []ingest.Pending{credit("evt_late", "pi_1", 7*time.Second), credit("evt_tie", "pi_2", time.Second)})
	require.Equal(t, []ingest.Outcome{ingest.Stale, ingest.Accepted}, outcomes(t, got))
	require.Equal(t, "evt_new", latest("pi_1"))
	require.Equal(t, "evt_tie", latest("pi_2"))
}

// A duplicate, inside one group or of an earlier one, is answered duplicate
// and writes nothing; its neighbours are committed.
func TestGroupAnswersDuplicatesAndCommitsTheRest(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	store := ingest.NewStore(db.Pool, noNotify{}, time.Now)
	require.Equal(t, []ingest.Outcome{ingest.Accepted}, outcomes(t, store.SaveGroup(ctx, []ingest.Pending{credit("evt_1", "pi_1", 0)})))

	got := store.SaveGroup(ctx, []ingest.Pending{
		credit("evt_2", "pi_2", 0), credit("evt_1", "pi_1", 0), credit("evt_3", "pi_3", 0), credit("evt_2", "pi_2", 0),
	})
	require.Equal(t, []ingest.Outcome{ingest.Accepted, ingest.Duplicate, ingest.Accepted, ingest.Duplicate}, outcomes(t, got))
	var events, rows int
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT (SELECT count(*) FROM webhook_events), (SELECT count(*) FROM transaction_outbox)").Scan(&events, &rows))
	require.Equal(t, 3, events)
	require.Equal(t, 3, rows, "one outbox row per stored event, none for a duplicate")
}

// The relays hear of a committed group from the group's own pipeline: no
// notifier goroutine runs here, so only the NOTIFY after COMMIT can wake the
// listener.
func TestCommittedGroupWakesTheRelays(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	wait := db.Listen(t, outbox.NotifyChannel)

	notifier := outbox.NewNotifier(db.Pool, outbox.NotifyInterval, slog.New(slog.DiscardHandler))
	store := ingest.NewStore(db.Pool, notifier, time.Now)
	got := store.SaveGroup(ctx, []ingest.Pending{credit("evt_1", "pi_1", 0), credit("evt_2", "pi_2", 0)})
	require.Equal(t, []ingest.Outcome{ingest.Accepted, ingest.Accepted}, outcomes(t, got))
	require.NoError(t, wait(5*time.Second), "the relays are woken")
}

// failingWake queues a relay wake-up that fails (as a NOTIFY would on a full
// notification queue) and counts the Notify calls that make up for it.
type failingWake struct{ notified int }

func (f *failingWake) Notify() { f.notified++ }
func (f *failingWake) QueueNotify(b *pgx.Batch) bool {
	b.Queue("SELECT 1/0")
	return true
}

// A wake-up that fails after COMMIT does not turn a committed group into an
// error (the PSP would retry webhooks that are stored); the notifier is
// asked to send another.
func TestGroupCommittedBeforeAFailedWakeUpIsAccepted(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	wake := &failingWake{}
	store := ingest.NewStore(db.Pool, wake, time.Now)
	got := store.SaveGroup(ctx, []ingest.Pending{credit("evt_1", "pi_1", 0), credit("evt_2", "pi_2", 0)})
	require.Equal(t, []ingest.Outcome{ingest.Accepted, ingest.Accepted}, outcomes(t, got))
	var rows int
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM transaction_outbox").Scan(&rows))
	require.Equal(t, 2, rows)
	require.Equal(t, 1, wake.notified, "the notifier sends the wake-up that failed")

	// A group that does not commit is an error, whatever the wake-up did.
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	got = store.SaveGroup(canceled, []ingest.Pending{credit("evt_3", "pi_3", 0)})
	require.ErrorIs(t, got[0].Err, context.Canceled)
	require.Empty(t, got[0].Outcome)
	require.NoError(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM transaction_outbox").Scan(&rows))
	require.Equal(t, 2, rows, "nothing of the failed group is stored")
}

// One webhook that cannot be stored as sent does not fail its group: it is
// stored as far as it can be and dead-lettered with its body, and its
// neighbours commit as usual (checkStorable routes it, no retry needed).
func TestUnstorableWebhookInAGroupIsDeadLetteredBesideItsNeighbours(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	store := ingest.NewStore(db.Pool, noNotify{}, time.Now)
	long := credit("evt_long", "pi_long", 0)
	random := make([]byte, 2000)
	_, _ = rand.Read(random)
	long.Event.Event.UserID = hex.EncodeToString(random) // incompressible: over the B-tree row limit
	long.Body = []byte(`{"id":"evt_long","metadata":{"user_id":"` + long.Event.Event.UserID + `"}}`)
	got := store.SaveGroup(ctx, []ingest.Pending{credit("evt_1", "pi_1", 0), long, credit("evt_2", "pi_2", 0)})
	require.Equal(t, []ingest.Outcome{ingest.Accepted, ingest.DeadLettered, ingest.Accepted}, outcomes(t, got))
	require.Contains(t, got[1].Reason, "user_id is 4000 bytes")
	var events, rows, letters int
	var user *string
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM webhook_events), (SELECT count(*) FROM transaction_outbox),
		(SELECT count(*) FROM dead_letters), (SELECT user_id FROM webhook_events WHERE event_id = 'evt_long')`).Scan(&events, &rows, &letters, &user))
	require.Equal(t, 3, events)
	require.Equal(t, 2, rows, "the unstorable event is never published")
	require.Equal(t, 1, letters)
	require.Nil(t, user, "the user id that cannot be stored is left out of the inbox row")
}
