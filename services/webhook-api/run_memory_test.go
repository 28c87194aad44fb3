package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/verify"
)

const memTestSecret = "whsec_memory_test"

// uploadAnswer is what one slow upload was answered.
type uploadAnswer struct {
	status     int
	code       string
	retryAfter string
	err        error
}

// slowUpload posts a webhook of size bytes to addr in chunks, all but its
// last byte, and then waits for release before sending that one: a client
// that trickles its body. held is told once everything but the last byte
// is written or the server has answered early; the answer (early, or
// after the last byte) is returned.
func slowUpload(addr string, size int, chunk []byte, held chan<- struct{}, release <-chan struct{}) uploadAnswer {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		held <- struct{}{}
		return uploadAnswer{err: err}
	}
	defer conn.Close()
	answered := make(chan uploadAnswer, 1)
	go func() { answered <- readAnswer(conn) }()
	_, err = fmt.Fprintf(conn, "POST /webhooks/stripe HTTP/1.1\r\nHost: webhook-api\r\nContent-Type: application/json\r\n"+
		"Stripe-Signature: t=%d,v1=00\r\nContent-Length: %d\r\n\r\n", time.Now().Unix(), size)
	for sent := 0; err == nil && sent < size-1; {
		select {
		case a := <-answered: // refused while sending
			held <- struct{}{}
			return a
		default:
		}
		n := min(len(chunk), size-1-sent)
		_, err = conn.Write(chunk[:n])
		sent += n
	}
	held <- struct{}{}
	if err != nil { // the server closed the connection: its answer is waiting
		return <-answered
	}
	select {
	case a := <-answered:
		return a
	case <-release:
	}
	if _, err := conn.Write(chunk[:1]); err != nil {
		return <-answered
	}
	return <-answered
}

func readAnswer(conn net.Conn) uploadAnswer {
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return uploadAnswer{err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return uploadAnswer{err: err}
	}
	var e struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		return uploadAnswer{status: resp.StatusCode, err: fmt.Errorf("answer %d not in the contract's error shape: %s", resp.StatusCode, raw)}
	}
	return uploadAnswer{status: resp.StatusCode, code: e.Error.Code, retryAfter: resp.Header.Get("Retry-After")}
}

func postSigned(t *testing.T, addr, eventID string) int {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"id":%q,"object":"event","api_version":"2024-06-20","created":%d,"type":"payment_intent.succeeded","data":{"object":{"id":"pi_%s","object":"payment_intent","amount":500,"amount_received":500,"currency":"usd","status":"succeeded","metadata":{"user_id":"user-mem"}}}}`,
		eventID, time.Now().Unix(), eventID))
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks/stripe", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Stripe-Signature", verify.SignStripe(memTestSecret, body, time.Now()))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// liveHeap is the heap the collector found reachable, just now: what the
// process holds, without the garbage allocated since.
func liveHeap() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// 200 clients trickle 300 KiB webhook bodies into the real server (run)
// with WEBHOOK_READING_MAX_MIB=4, and hold their last byte. The live heap
// grows by no more than the 4 MiB the bodies may hold (plus the
// connections' own buffers); the uploads beyond it are answered 503
// overloaded with Retry-After at once; the ones read are refused for their
// signature once complete; the webhooks committed before are still stored
// and the next one is accepted. Without the bound every upload's buffer
// grows with its bytes: about 60 MiB.
//
// Not parallel: it measures the process's heap, once the server is at rest
// with the uploads held (looked at until it is, within a bound).
func TestSlowUploadsDoNotGrowTheHeapBeyondTheReadingBound(t *testing.T) {
	db := pgtest.New(t)
	logs := &proctest.Logs{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, env(map[string]string{
			"DATABASE_URL":            db.URL,
			"HTTP_ADDR":               "127.0.0.1:0",
			"SHUTDOWN_GRACE":          "2s",
			"STRIPE_WEBHOOK_SECRET":   memTestSecret,
			"WEBHOOK_READING_MAX_MIB": "4",
		}), logs)
	}()
	require.Eventually(t, func() bool { return logs.ListenAddr() != "" }, 30*time.Second, 10*time.Millisecond)
	addr := logs.ListenAddr()
	for i := range 3 {
		require.Equal(t, http.StatusOK, postSigned(t, addr, fmt.Sprintf("evt_mem_before_%d", i)))
	}

	const (
		uploads  = 200
		size     = 300 << 10
		bound    = 4 << 20
		slack    = 4 << 20 // the connections' buffers, client and server side, and the run's own
		maxHeld  = bound / (size + 1)
		settling = 20 * time.Second // the bound on coming to rest
	)
	chunk := bytes.Repeat([]byte("x"), 16<<10)
	base := liveHeap()
	held := make(chan struct{}, uploads)
	release := make(chan struct{})
	answers := make(chan uploadAnswer, uploads)
	for range uploads {
		go func() { answers <- slowUpload(addr, size, chunk, held, release) }()
	}
	for i := range uploads {
		select {
		case <-held:
		case <-time.After(60 * time.Second):
			close(release)
			t.Fatalf("only %d of %d uploads were written or answered", i, uploads)
		}
	}
	// The server is at rest once no upload was answered since the last
	// look and the live heap did not move: the uploads left are the ones
	// it is reading. While it still works, what it allocates during a
	// collection counts as live for that collection.
	grown, answered, still := liveHeap()-base, len(answers), 0
	require.Eventually(t, func() bool {
		now, nowAnswered := liveHeap()-base, len(answers)
		if nowAnswered == answered && now-grown < 1<<20 && grown-now < 1<<20 {
			still++
		} else {
			still = 0
		}
		grown, answered = now, nowAnswered
		return still == 2
	}, settling, 10*time.Millisecond, "the server never came to rest with the uploads held")
	close(release)
	counts := map[int]int{}
	for range uploads {
		a := <-answers
		require.NoError(t, a.err)
		switch a.status {
		case http.StatusServiceUnavailable:
			require.Equal(t, "overloaded", a.code)
			require.Equal(t, "1", a.retryAfter, "a refused upload says when to retry")
		case http.StatusUnauthorized: // read in full, then refused for its signature
			require.Equal(t, "invalid_signature", a.code)
		default:
			t.Fatalf("unexpected answer %+v", a)
		}
		counts[a.status]++
	}
	t.Logf("live heap grew by %.1f MiB with %d uploads held; %d read in full, %d answered 503",
		float64(grown)/(1<<20), uploads, counts[http.StatusUnauthorized], counts[http.StatusServiceUnavailable])
	require.LessOrEqual(t, grown, int64(bound+slack), "slow uploads grew the live heap beyond the reading bound")
	require.LessOrEqual(t, counts[http.StatusUnauthorized], maxHeld, "more bodies were read at once than the bound holds")

	require.Equal(t, http.StatusOK, postSigned(t, addr, "evt_mem_after"), "a webhook after the uploads is accepted")
	var stored int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_events WHERE event_id = ANY($1)`,
		[]string{"evt_mem_before_0", "evt_mem_before_1", "evt_mem_before_2", "evt_mem_after"}).Scan(&stored))
	require.Equal(t, 4, stored, "the webhooks committed before the uploads are still stored, and the next one is")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after SIGTERM")
	}
}
