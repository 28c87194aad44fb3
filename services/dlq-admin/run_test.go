package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/kafkatest"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/proctest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestReadConfigDefaults(t *testing.T) {
	t.Parallel()
	c, err := readConfig(env(nil))
	require.NoError(t, err)
	require.Equal(t, ":8083", c.HTTPAddr)
	require.Equal(t, []string{"127.0.0.1:9092"}, c.KafkaBrokers)
	require.Equal(t, "dlq-admin", c.ConsumerGroup)
	require.Empty(t, c.Tokens)

	c, err = readConfig(env(map[string]string{
		"KAFKA_BROKERS":      "k1:9092, k2:9093",
		"DLQ_ADMIN_TOKENS":   "ops:operator:operator-token-0123456789,ro:viewer:viewer-token-0123456789",
		"DLQ_CONSUMER_GROUP": "dlq-admin-blue",
	}))
	require.NoError(t, err)
	require.Equal(t, []string{"k1:9092", "k2:9093"}, c.KafkaBrokers)
	require.Equal(t, "dlq-admin-blue", c.ConsumerGroup)
	require.Equal(t, 50.0, c.ReplayRate)
	require.Equal(t, 24*time.Hour, c.ReconcileInterval)
	require.Equal(t, int64(100), c.Monitor.DepthThreshold)
	require.Equal(t, 30*time.Second, c.Monitor.CheckInterval)

	c, err = readConfig(env(map[string]string{
		"REPLAY_RATE": "5", "RECONCILE_INTERVAL": "1h", "DLQ_DEPTH_ALERT_THRESHOLD": "7", "DLQ_CHECK_INTERVAL": "10s",
	}))
	require.NoError(t, err)
	require.Equal(t, 5.0, c.ReplayRate)
	require.Equal(t, time.Hour, c.ReconcileInterval)
	require.Equal(t, int64(7), c.Monitor.DepthThreshold)
	require.Equal(t, 10*time.Second, c.Monitor.CheckInterval)

	// The webhook sink was removed: configured, dlq-admin refuses to start
	// and says where pages go now.
	_, err = readConfig(env(map[string]string{"ALERT_WEBHOOK_URL": "https://hooks.example/T0/B0/secret"}))
	require.ErrorContains(t, err, "ALERT_WEBHOOK_URL was removed")
	require.ErrorContains(t, err, "Alertmanager")
	require.NotContains(t, err.Error(), "hooks.example", "the value is a credential")
}

func TestReadConfigNamesTheBadVariable(t *testing.T) {
	t.Parallel()
	cases := map[string]map[string]string{
		"KAFKA_BROKERS":             {"KAFKA_BROKERS": "no-port"},
		"DLQ_ADMIN_TOKENS":          {"DLQ_ADMIN_TOKENS": "ops:admin:operator-token-0123456789"},
		"HTTP_ADDR":                 {"HTTP_ADDR": "8083"},
		"SHUTDOWN_GRACE":            {"SHUTDOWN_GRACE": "soon"},
		"REPLAY_RATE":               {"REPLAY_RATE": "0"},
		"RECONCILE_INTERVAL":        {"RECONCILE_INTERVAL": "daily"},
		"DLQ_DEPTH_ALERT_THRESHOLD": {"DLQ_DEPTH_ALERT_THRESHOLD": "0"},
		"DLQ_CHECK_INTERVAL":        {"DLQ_CHECK_INTERVAL": "-1s"},
		"ALERT_WEBHOOK_FORMAT":      {"ALERT_WEBHOOK_FORMAT": "slack"},
		"KAFKA_SASL_MECHANISM":      {"KAFKA_SASL_MECHANISM": "PLAIN", "KAFKA_SASL_USERNAME": "u", "KAFKA_SASL_PASSWORD": "p"},
		"KAFKA_TLS_CA_FILE":         {"KAFKA_TLS_CA_FILE": "/nonexistent/ca.pem"},
	}
	for name, vars := range cases {
		_, err := readConfig(env(vars))
		require.ErrorContains(t, err, name)
	}
	_, err := readConfig(env(map[string]string{"KAFKA_BROKERS": " , "}))
	require.ErrorContains(t, err, "KAFKA_BROKERS")
	_, err = readConfig(env(map[string]string{"DLQ_ADMIN_TOKENS": "ops:viewer:short"}))
	require.ErrorContains(t, err, "DLQ_ADMIN_TOKENS")
	require.NotContains(t, err.Error(), "short", "a token never appears in errors")
}

func TestRunServesConsumesAndStops(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	cluster := kafkatest.NewCluster(t)
	const token = "viewer-token-0123456789"
	logs := &proctest.Logs{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, env(map[string]string{
			"DATABASE_URL":     db.URL,
			"HTTP_ADDR":        "127.0.0.1:0",
			"KAFKA_BROKERS":    strings.Join(cluster.ListenAddrs(), ","),
			"DLQ_ADMIN_TOKENS": "ops:viewer:" + token,
			"SHUTDOWN_GRACE":   "5s",
			// the open-letter gauge is refreshed at each check
			"DLQ_CHECK_INTERVAL": "200ms",
		}), logs)
	}()
	require.Eventually(t, func() bool { return logs.ListenAddr() != "" }, 30*time.Second, 10*time.Millisecond)
	base := "http://" + logs.ListenAddr()

	call := func(path, tok string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		require.NoError(t, err)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	status, body := call("/readyz", "")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"kafka":"ok"`)
	require.Contains(t, body, `"postgres":"ok"`)
	status, _ = call("/v1/dead-letters", "")
	require.Equal(t, http.StatusUnauthorized, status)

	p, o := int32(0), int64(5)
	rec, err := dlq.Letter{Source: dlq.SourceConsumer, OriginalTopic: kafkax.TopicTransactions, OriginalPartition: &p,
		OriginalOffset: &o, Payload: []byte(`{"card_number":"4000056655665556"}`), Error: "boom", ErrorClass: "permanent",
		FirstFailureAt: time.Now(), FailedAt: time.Now()}.Record()
	require.NoError(t, err)
	producer := kafkatest.NewClient(t, cluster)
	require.NoError(t, producer.ProduceSync(ctx, rec).FirstErr())
	require.Eventually(t, func() bool {
		_, body := call("/v1/dead-letters", token)
		return strings.Contains(body, `"original_offset":5`)
	}, 30*time.Second, 20*time.Millisecond)

	// The new letter raised its alert (its structured log line, naming the
	// rule that pages for it) and the condition that pages is on /metrics.
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "ALERT: dead letter on aegis.transactions (permanent)")
	}, 30*time.Second, 20*time.Millisecond)
	require.Contains(t, logs.String(), `"runbook":"docs/runbooks/AegisDeadLetterOpen.md"`)
	require.Eventually(t, func() bool {
		_, body := call("/metrics", token)
		return strings.Contains(body, `aegis_dlq_open_letters{class="permanent",topic="aegis.transactions"} 1`)
	}, 30*time.Second, 20*time.Millisecond, "the open letter is a gauge on /metrics")
	// The page is served without a token.
	resp, err := http.Get(base + "/")
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(page), "Dead letters")
	// The pool's and both Kafka clients' metrics are on the service's
	// registry: the consumer fetched the letter.
	_, metrics := call("/metrics", "")
	require.Contains(t, metrics, "\naegis_db_pool_max_conns 8\n")
	require.Regexp(t, `aegis_kafka_fetch_records_total\{client="dlq-consumer",[^}]*topic="aegis.transactions.dlq"\} 1\n`, metrics)
	require.Contains(t, metrics, `aegis_kafka_connects_total{client="admin"`)

	cancel()
	require.NoError(t, <-done, "a SIGTERM is a clean exit")
	out := logs.String()
	require.Contains(t, out, "dlq-admin stopped")
	require.NotContains(t, out, token, "logs never carry tokens")
	require.NotContains(t, out, "4000056655665556", "logs never carry payloads")
}
