package intake_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/panics"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/intake"
)

// incompressible returns n random hex characters: Postgres cannot compress
// them under the B-tree row limit.
func incompressible(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n/2)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// A dead letter Postgres refuses for its data (here an original topic too
// long for the origin index, SQLSTATE 54000) must not fail for ever, with
// nothing after it stored or committed: it is stored raw, the letter after
// it normally, and the offsets move.
func TestALetterPostgresRefusesIsStoredRawAndDoesNotBlockItsPartition(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.NewCluster(t)
	db := pgtest.New(t)

	bad := consumerLetter()
	bad.OriginalTopic = incompressible(t, 9000)
	bad.Payload = []byte(`{"the":"payload"}`)
	good := consumerLetter()
	o := int64(42)
	good.OriginalOffset = &o
	badRec := record(t, bad)
	badRec.Topic = kafkax.DLQTopic(kafkax.TopicTransactions) // same topic and key as good: one partition
	produce(t, cluster, badRec, record(t, good))

	c := start(t, cluster, db.Pool)
	waitForRows(t, db, 2)
	require.NoError(t, c.stop())
	require.Equal(t, ends(t, cluster), committed(t, cluster), "the partition moved past the refused letter")
	require.Equal(t, 1.0, counter(t, c.reg, "aegis_dlq_stored_raw_total", nil))

	var class, errText, topic string
	var payload []byte
	require.NoError(t, db.Pool.QueryRow(context.Background(), `
		SELECT error_class, error, original_topic, payload FROM dead_letters WHERE error_class = 'poison'`).
		Scan(&class, &errText, &topic, &payload))
	require.Contains(t, errText, "stored raw")
	require.Contains(t, errText, database.CodeProgramLimitExceeded)
	require.Contains(t, errText, "psp rejected: account_invalid", "the original error is kept")
	require.Equal(t, `{"the":"payload"}`, string(payload), "the value is kept as it came")
	require.Len(t, topic, 249)
}

// While Postgres cannot store a letter the retries are bounded by RetryFor:
// the record is then released (nothing committed, its partition rewound)
// and polled again, and it is stored once Postgres answers.
func TestAnUnstorableLetterIsReleasedAfterRetryForAndStoredLater(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.NewCluster(t)
	db := pgtest.New(t)
	u, err := url.Parse(db.URL)
	require.NoError(t, err)
	u.Path = fmt.Sprintf("/%s_does_not_exist", db.Name)
	broken, err := pgxpool.New(context.Background(), u.String())
	require.NoError(t, err)
	t.Cleanup(broken.Close)

	produce(t, cluster, record(t, consumerLetter()))
	c := startWith(t, cluster, broken, intake.Config{RetryFor: 100 * time.Millisecond}, nil)
	require.Eventually(t, func() bool {
		return counter(t, c.reg, "aegis_consumer_retry_exhausted_total", nil) >= 2
	}, waitFor, 10*time.Millisecond, "the record is released and polled again, more than once")
	require.NoError(t, c.stop())
	require.Empty(t, committed(t, cluster), "a released record is not committed")

	good := start(t, cluster, db.Pool)
	waitForRows(t, db, 1)
	require.NoError(t, good.stop())
	require.Equal(t, ends(t, cluster), committed(t, cluster))
}

// A panic while storing a letter (here in the OnStored callback) is
// recovered and counted; the record is released, polled again and stored
// once, and the consumer goes on.
func TestAPanicWhileStoringReleasesTheLetter(t *testing.T) {
	t.Parallel()
	cluster := kafkatest.NewCluster(t)
	db := pgtest.New(t)
	counter := panics.NewCounter(prometheus.NewRegistry())
	var calls atomic.Int32
	produce(t, cluster, record(t, consumerLetter()))
	c := startWith(t, cluster, db.Pool, intake.Config{OnStored: func() {
		if calls.Add(1) == 1 {
			panic("monitor bug")
		}
	}}, counter)
	require.Eventually(t, func() bool {
		return counter.Value("dlq-admin/consumer") == 1 && len(committed(t, cluster)) > 0
	}, waitFor, 10*time.Millisecond)
	waitForRows(t, db, 1)
	require.NoError(t, c.stop())
	require.Equal(t, ends(t, cluster), committed(t, cluster))
}
