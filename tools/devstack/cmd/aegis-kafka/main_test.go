package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/proctest"
)

// A fault given a duration fails every matching request for that long and
// then goes away on its own: a produce inside the window is refused with
// the injected error, one after it succeeds.
func TestFaultWindowEndsByItself(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	logs := &proctest.Logs{}
	api := httptest.NewServer(faultAPI(c, slog.New(slog.NewTextHandler(logs, nil))))
	t.Cleanup(api.Close)

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordRetries(0),
		kgo.RequestRetries(0), kgo.UnknownTopicRetries(0))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("before")}).FirstErr())

	for _, bad := range []string{`{"error":"NOT_LEADER_FOR_PARTITION","request":"produce","for":"-1s"}`,
		`{"error":"NOT_LEADER_FOR_PARTITION","request":"produce","for":"1s","count":3}`} {
		resp, err := http.Post(api.URL+"/faults", "application/json", strings.NewReader(bad))
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, bad)
	}
	resp, err := http.Post(api.URL+"/faults", "application/json",
		strings.NewReader(`{"error":"NOT_LEADER_FOR_PARTITION","request":"produce","for":"1500ms"}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)

	err = cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("inside")}).FirstErr()
	require.True(t, errors.Is(err, kerr.NotLeaderForPartition), "inside the window: %v", err)

	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "fault window ended") }, 30*time.Second,
		10*time.Millisecond, "the fault window never ended")
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("after")}).FirstErr())
}
