package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
)

// delivery is one request an outbound receiver got.
type delivery struct {
	header http.Header
	body   []byte
	// eventID and eventType are the body's.
	eventID, eventType string
}

// outboundReceiver is a platform's endpoint: it verifies every delivery
// with the Standard Webhooks library under the one secret it holds,
// answers 200 to what verifies and 401 to what does not, and keeps both.
type outboundReceiver struct {
	srv *httptest.Server

	mu         sync.Mutex
	wh         *standardwebhooks.Webhook
	accepted   []delivery
	unverified []string
}

func newOutboundReceiver(t *testing.T) *outboundReceiver {
	t.Helper()
	rc := &outboundReceiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if rc.wh == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if err := rc.wh.Verify(body, r.Header); err != nil {
			rc.unverified = append(rc.unverified, fmt.Sprintf("%s: %v", r.Header.Get("webhook-id"), err))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var ev struct {
			EventID string `json:"event_id"`
			Type    string `json:"type"`
		}
		_ = json.Unmarshal(body, &ev)
		rc.accepted = append(rc.accepted, delivery{header: r.Header.Clone(), body: body, eventID: ev.EventID, eventType: ev.Type})
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// hold makes secret the one the receiver verifies with.
func (rc *outboundReceiver) hold(t *testing.T, secret string) {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	rc.mu.Lock()
	rc.wh = wh
	rc.mu.Unlock()
}

// ofType returns the deliveries accepted of an event type.
func (rc *outboundReceiver) ofType(typ string) []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []delivery
	for _, d := range rc.accepted {
		if d.eventType == typ {
			out = append(out, d)
		}
	}
	return out
}

func (rc *outboundReceiver) refused() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.unverified...)
}

// createEndpoint registers url through dlq-admin's API as an operator and
// returns the endpoint's id and secret.
func (s *suite) createEndpoint(url, description string) (id, secret string) {
	s.t.Helper()
	body, err := json.Marshal(map[string]any{"url": url, "description": description})
	require.NoError(s.t, err)
	r := s.do(http.MethodPost, s.dlq+"/v1/outbound/endpoints", body, s.bearer(s.opToken))
	require.Equal(s.t, http.StatusCreated, r.status, r.raw)
	id, secret = fieldOf(r.body, "id"), fieldOf(r.body, "secret")
	require.NotEmpty(s.t, id, r.raw)
	require.True(s.t, strings.HasPrefix(secret, "whsec_"), "the creation shows the secret: %s", r.raw)
	return id, secret
}

// fieldOf reads a string field of an endpoint answer: at the top level, or
// of the endpoint nested under "endpoint".
func fieldOf(m map[string]any, name string) string {
	if v, ok := m[name].(string); ok {
		return v
	}
	if ep, ok := m["endpoint"].(map[string]any); ok {
		v, _ := ep[name].(string)
		return v
	}
	return ""
}

// The whole suite delivers a payout's outcome and a refund to both
// endpoints registered through dlq-admin's API, as Standard Webhooks
// requests the specification's library verifies: webhook-id is the
// event's id, the body the event with its per-user sequence. One endpoint's
// secret is rotated between the two events; its receiver, still holding
// only the old secret, verifies the refund during the overlap, and so does
// one holding only the new secret.
func TestOutboundEventsReachEveryEndpointVerifiedAcrossARotation(t *testing.T) {
	t.Parallel()
	s := start(t)
	first, second := newOutboundReceiver(t), newOutboundReceiver(t)
	firstID, firstSecret := s.createEndpoint(first.srv.URL+"/aegis", "e2e: the first receiver")
	secondID, oldSecret := s.createEndpoint(second.srv.URL+"/aegis", "e2e: the second receiver")
	require.NotEqual(t, firstSecret, oldSecret, "each endpoint has its own secret")
	first.hold(t, firstSecret)
	second.hold(t, oldSecret)

	// A payment credited, then paid out through a connected account.
	user := "olivia"
	pay := s.do(http.MethodPost, s.psp+"/_psp/payments", []byte(`{"provider":"stripe","user_id":"olivia","amount":5000,"currency":"usd"}`), nil)
	require.Equal(t, http.StatusCreated, pay.status, pay.raw)
	pi := pay.body["id"].(string)
	s.eventually("olivia is credited", func() bool { return s.balance(user) == 5000 })
	s.registerDestination(user, "stripe", "acct_olivia", "ba_olivia_checking")
	p := s.do(http.MethodPost, s.api+"/v1/payouts", []byte(`{"user_id":"olivia","amount":1500,"currency":"usd","destination":"acct_olivia","provider":"stripe"}`),
		map[string]string{"Authorization": "Bearer " + s.token, "Idempotency-Key": "e2e-outbound-payout"})
	require.Equal(t, http.StatusAccepted, p.status, p.raw)
	pid := p.body["payout_id"].(string)
	s.eventually("the payout's outcome reached both endpoints", func() bool {
		return len(first.ofType("payout.succeeded")) > 0 && len(second.ofType("payout.succeeded")) > 0
	})
	for name, rc := range map[string]*outboundReceiver{"first": first, "second": second} {
		d := rc.ofType("payout.succeeded")[0]
		require.Equal(t, d.eventID, d.header.Get("webhook-id"), "%s: webhook-id is the event's id", name)
		require.Contains(t, d.eventID, pid, "%s: the event of our payout", name)
		var ev map[string]any
		require.NoError(t, json.Unmarshal(d.body, &ev))
		require.Equal(t, user, ev["user_id"], name)
		require.Positive(t, ev["sequence"], "%s: the body carries the user's sequence", name)
	}

	// The second endpoint's secret is rotated; its receiver keeps the old
	// one for now.
	rot := s.do(http.MethodPost, s.dlq+"/v1/outbound/endpoints/"+secondID+"/rotate-secret", []byte(`{}`), s.bearer(s.opToken))
	require.Contains(t, []int{http.StatusOK, http.StatusCreated}, rot.status, rot.raw)
	newSecret := fieldOf(rot.body, "secret")
	require.True(t, strings.HasPrefix(newSecret, "whsec_"), rot.raw)
	require.NotEqual(t, oldSecret, newSecret)
	sec := s.do(http.MethodGet, s.dlq+"/v1/outbound/endpoints/"+secondID+"/secret", nil, s.bearer(s.opToken))
	require.Equal(t, http.StatusOK, sec.status, sec.raw)
	require.Equal(t, newSecret, sec.body["secret"], sec.raw)
	require.NotNil(t, sec.body["previous_secret_expires_at"], "the old secret signs for the overlap: %s", sec.raw)

	// A refund of the payment, after the rotation.
	ref := s.do(http.MethodPost, s.psp+"/_psp/payments/"+pi+"/refunds", []byte(`{"amount":1000}`), nil)
	require.Equal(t, http.StatusCreated, ref.status, ref.raw)
	s.eventually("the refund reached both endpoints", func() bool {
		return len(first.ofType("refund.posted")) > 0 && len(second.ofType("refund.posted")) > 0
	})
	refund := second.ofType("refund.posted")[0]
	require.Len(t, strings.Fields(refund.header.Get("webhook-signature")), 2, "new and old secret sign during the overlap")
	newOnly, err := standardwebhooks.NewWebhook(newSecret)
	require.NoError(t, err)
	require.NoError(t, newOnly.Verify(refund.body, refund.header), "a receiver holding only the new secret verifies it too")
	require.Equal(t, refund.eventID, refund.header.Get("webhook-id"))
	firstOnly, err := standardwebhooks.NewWebhook(firstSecret)
	require.NoError(t, err)
	require.Error(t, firstOnly.Verify(refund.body, refund.header), "another endpoint's secret does not verify it")

	require.Empty(t, first.refused(), "every delivery to the first endpoint verified")
	require.Empty(t, second.refused(), "every delivery to the second endpoint verified")
	// The delivery log agrees: each of the two messages succeeded at each
	// endpoint.
	for _, ep := range []string{firstID, secondID} {
		require.Equal(t, 2, s.count(`SELECT count(*) FROM outbound_deliveries d JOIN outbound_messages m ON m.id = d.message_id
			WHERE d.endpoint_id = $1::uuid AND d.state = 'succeeded' AND m.event_type IN ('payout.succeeded', 'refund.posted')`, ep))
	}
}
