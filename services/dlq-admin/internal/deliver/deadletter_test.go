package deliver_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deliver"
)

// A dead letter Postgres cannot store is retried within the event's retry
// budget; past it an alert says so and the event stays uncommitted: it is
// polled again, and dead-lettered once Postgres answers. It is never
// committed without its letter.
func TestADeadLetterThatCannotBeStoredAlertsAndIsNotCommitted(t *testing.T) {
	t.Parallel()
	b := &bench{db: pgtest.New(t), cluster: kafkatest.NewCluster(t), rc: newReceiver(t, always(http.StatusBadRequest)),
		reg: prometheus.NewRegistry()}
	u, err := url.Parse(b.db.URL)
	require.NoError(t, err)
	u.Path = "/" + b.db.Name + "_does_not_exist"
	broken, err := pgxpool.New(context.Background(), u.String())
	require.NoError(t, err)
	t.Cleanup(broken.Close)

	bad := refundPosted("hank", "re_unstorable")
	b.publish(t, bad)
	reg := prometheus.NewRegistry()
	alerts, err := alert.New(alert.Config{Source: "deliver-test"},
		lifecycle.Deps{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registerer: reg, Clock: time.Now})
	require.NoError(t, err)
	stop := b.run(t, func(c *deliver.Config) { c.DeadLetterFor = 500 * time.Millisecond }, broken, alerts, reg)
	key := alert.DeadLetterPublishFailedKey(kafkax.TopicSettlements)
	require.Eventually(t, func() bool { return alertsRaised(t, reg, key) >= 2 }, waitFor, 20*time.Millisecond,
		"the event was not polled again after its letter could not be stored")
	stop()
	require.Empty(t, b.letters(t))
	require.Equal(t, int64(-1), b.committed(t), "committed without its dead letter")

	b.run(t, func(*deliver.Config) {}, b.db.Pool, nil, prometheus.NewRegistry())
	require.Eventually(t, func() bool { return len(b.letters(t)) == 1 }, waitFor, 20*time.Millisecond)
	require.Eventually(t, func() bool { return b.committed(t) == 1 }, waitFor, 20*time.Millisecond)
	l := b.letters(t)[0]
	require.Equal(t, "permanent", l.class)
	require.Contains(t, l.errText, "settlement webhook not delivered: receiver answered 400")
}

// committed is the group's committed offset on aegis.settlements (-1: none).
func (b *bench) committed(t *testing.T) int64 {
	t.Helper()
	offsets, err := kadm.NewClient(kafkatest.NewClient(t, b.cluster)).FetchOffsets(context.Background(), group)
	require.NoError(t, err)
	at := int64(-1)
	offsets.Each(func(o kadm.OffsetResponse) {
		if o.Topic == kafkax.TopicSettlements && o.At > at {
			at = o.At
		}
	})
	return at
}

func alertsRaised(t *testing.T, reg *prometheus.Registry, key string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() != "aegis_alerts_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "key" && lp.GetValue() == key {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
