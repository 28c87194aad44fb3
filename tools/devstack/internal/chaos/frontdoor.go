package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aegis-payments/aegis/pkg/hmacsig"
	"github.com/aegis-payments/aegis/tools/devstack/internal/published"
)

// The front door's part of the run: payouts need a registered
// destination, a second API client keeps trying to reach the first one's
// users, and some payments name a user id no store can hold.

const (
	// chaosClient acts for the workload's users; intruder for users of its
	// own, and keeps trying the workload's.
	chaosToken    = "dev-api-token-0123456789"
	intruderToken = "chaos-intruder-token-0123456789"
)

// chaosAPITokens configures the two clients (API_TOKENS).
const chaosAPITokens = "chaos(chaos-*):" + chaosToken + ",intruder(intruder-*):" + intruderToken

// frontDoor records what the front-door operations sent and got.
type frontDoor struct {
	mu sync.Mutex
	// intrusions are the intruder's requests with their answers.
	intrusions []intrusion
	// unstorable are the payments whose user id cannot be stored.
	unstorable []unstorablePayment
	// registrations counts destination registrations by answer.
	registrations map[int]int
}

type intrusion struct {
	What   string
	Status int
}

type unstorablePayment struct {
	EventID, Reference string
	Status             int
	Outcome            string
	// Resent: an earlier send got no answer (a timeout, a 5xx) and the
	// event was sent again, as a PSP does; the first may have been stored,
	// so "duplicate" is then a right answer too.
	Resent bool
}

// frontDoorOp draws, from the workload's seeded source, whether the next
// operation is a front-door one and returns it (nil otherwise). Called with
// w.mu held.
func (w *workload) frontDoorOp(n int, user string) func() {
	r := w.rng.Float64()
	switch {
	case r < 0.03:
		kind := w.rng.IntN(4)
		return func() { w.intrude(n, user, kind) }
	case r < 0.04:
		return func() { w.unstorablePayment(n) }
	}
	return nil
}

// intrude is the intruder client reaching for a workload user: a payout
// from their wallet to its own account, by value and by a destination id,
// a read of their payout or wallet, a destination of its own on them.
func (w *workload) intrude(n int, user string, kind int) {
	h := map[string]string{"Authorization": "Bearer " + intruderToken, "Content-Type": "application/json"}
	var what string
	var status int
	switch kind {
	case 0:
		what = "payout from " + user
		h["Idempotency-Key"] = fmt.Sprintf("intruder-key-%d", n)
		status, _ = w.postJSON("/v1/payouts", []byte(fmt.Sprintf(
			`{"user_id":%q,"amount":100,"currency":"usd","destination":"acct_intruder_%d","provider":"stripe"}`, user, n)), h)
	case 1:
		what = "destination on " + user
		status, _ = w.postJSON("/v1/users/"+user+"/destinations", []byte(fmt.Sprintf(
			`{"provider":"stripe","destination":"acct_intruder_%d","external_account":"ba_intruder_%d"}`, n, n)), h)
	case 2:
		what = "wallet of " + user
		status, _ = w.getAs("/v1/wallets/"+user, intruderToken)
	default:
		pid := w.somePayout()
		if pid == "" {
			return
		}
		what = "payout " + pid
		status, _ = w.getAs("/v1/payouts/"+pid, intruderToken)
	}
	w.door.mu.Lock()
	w.door.intrusions = append(w.door.intrusions, intrusion{What: what, Status: status})
	w.door.mu.Unlock()
	w.count("intrusion")
}

// unstorablePayment is a signed Stripe payment whose metadata.user_id is
// longer than any store holds: the PSP must get a 200 (or it retries until
// it gives up on the payment), and the payment must end as a visible dead
// letter, never credited.
func (w *workload) unstorablePayment(n int) {
	pi := fmt.Sprintf("pi_chaos_long_%d", n)
	id := fmt.Sprintf("evt_chaos_long_%d", n)
	user := "chaos-" + incompressible(n, 3200)
	body := w.stripeEvent(id, "payment_intent.succeeded", time.Now().Unix(), fmt.Sprintf(
		`{"id":%q,"object":"payment_intent","amount":900,"amount_received":900,"currency":"usd","status":"succeeded","metadata":{"user_id":%q}}`,
		pi, user))
	status, answer, sends := w.sendStripeJSON(body)
	outcome, _ := answer["status"].(string)
	w.door.mu.Lock()
	w.door.unstorable = append(w.door.unstorable, unstorablePayment{EventID: id, Reference: "stripe:" + pi, Status: status,
		Outcome: outcome, Resent: sends > 1})
	w.door.mu.Unlock()
	// Recorded as a webhook too (no Reference: nothing may be credited), so
	// the webhook invariants hold it to "stored once".
	w.record(&webhook{Provider: "stripe", EventID: id, Kind: "unstorable", Status: status})
}

// incompressible is a deterministic id of size hex characters that Postgres
// cannot compress under its B-tree row limit (a repeated letter would fit).
func incompressible(seed, size int) string {
	var b strings.Builder
	sum := sha256.Sum256([]byte(fmt.Sprint(seed)))
	for b.Len() < size {
		b.WriteString(hex.EncodeToString(sum[:]))
		sum = sha256.Sum256(sum[:])
	}
	return b.String()[:size]
}

// sendStripeJSON is sendStripe keeping the answer's body; sends is how
// many times the event went out.
func (w *workload) sendStripeJSON(body []byte) (status int, answer map[string]any, sends int) {
	sends = retryLikeAPSP(func() int {
		status, answer = w.postJSON("/webhooks/stripe", body, map[string]string{
			"Content-Type": "application/json", "Stripe-Signature": signStripe(w.secret, body)})
		return status
	})
	return status, answer, sends
}

// registerDestination registers the destination of a payout body for its
// user (with external, when not empty, as its Stripe connected account's
// external account), as a client must before the payout, retrying what a
// client would.
func (w *workload) registerDestination(body, external string) {
	var req struct{ UserID, Provider, Destination string }
	var raw map[string]any
	_ = json.Unmarshal([]byte(body), &raw)
	req.UserID, _ = raw["user_id"].(string)
	req.Provider, _ = raw["provider"].(string)
	req.Destination, _ = raw["destination"].(string)
	reg, _ := json.Marshal(struct {
		Provider        string `json:"provider"`
		Destination     string `json:"destination"`
		ExternalAccount string `json:"external_account,omitempty"`
	}{req.Provider, req.Destination, external})
	h := map[string]string{"Authorization": "Bearer " + w.token, "Content-Type": "application/json"}
	var status int
	for attempt := 0; attempt < 6; attempt++ {
		status, _ = w.postJSON("/v1/users/"+req.UserID+"/destinations", reg, h)
		if status != 0 && status < 500 {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 500 * time.Millisecond)
	}
	w.door.mu.Lock()
	if w.door.registrations == nil {
		w.door.registrations = map[int]int{}
	}
	w.door.registrations[status]++
	w.door.mu.Unlock()
}

// signStripe is a Stripe-Signature header for body, signed now.
func signStripe(secret string, body []byte) string {
	return hmacsig.SignTimestamped([]byte(secret), time.Now(), body)
}

func (w *workload) somePayout() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.payouts) - 1; i >= 0; i-- {
		if w.payouts[i].PayoutID != "" {
			return w.payouts[i].PayoutID
		}
	}
	return ""
}

func (w *workload) count(kind string) {
	w.mu.Lock()
	w.sent[kind]++
	w.mu.Unlock()
}

func (w *workload) getAs(path, token string) (int, map[string]any) {
	req, _ := http.NewRequest(http.MethodGet, w.api+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// checkFrontDoor: 7. The intruder got nothing: every attempt refused 403
// (a read may also meet a 503 while Postgres connections are being killed,
// never a 2xx) and nothing was written on its behalf. Every payment with an
// unstorable user id was answered 200 dead_lettered, is stored once, sits
// in an open dead letter with its body, and was never credited: a visible
// failure, not a lost credit. Every destination registration was answered.
func (su *suite) checkFrontDoor(ctx context.Context, wl *workload, rep *Report) error {
	bad := 0
	d := &wl.door
	d.mu.Lock()
	defer d.mu.Unlock()
	refused := 0
	for _, in := range d.intrusions {
		switch {
		case in.Status == http.StatusForbidden:
			refused++
		case in.Status/100 == 2:
			rep.violation("the intruder client's %s answered %d", in.What, in.Status)
			bad++
		case strings.HasPrefix(in.What, "payout from") || strings.HasPrefix(in.What, "destination on"):
			// Writes are refused before the database is touched: only 403.
			rep.violation("the intruder client's %s answered %d, want 403", in.What, in.Status)
			bad++
		}
	}
	var payouts, destinations, outbox int
	err := su.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM payouts WHERE client_id = 'intruder' OR idempotency_key LIKE 'intruder-%'),
		(SELECT count(*) FROM destinations WHERE created_by = 'intruder' OR disabled_by = 'intruder' OR destination LIKE 'acct\_intruder\_%'),
		(SELECT count(*) FROM `+published.All+` o WHERE payload->>'user_id' LIKE 'intruder%')`).Scan(&payouts, &destinations, &outbox)
	if err != nil {
		return err
	}
	if payouts+destinations+outbox > 0 {
		rep.violation("the intruder client left %d payouts, %d destinations, %d outbox rows", payouts, destinations, outbox)
		bad++
	}
	for _, u := range d.unstorable {
		switch {
		case u.Status == 0 || u.Status >= 500:
			continue // never answered: the PSP would retry; nothing to hold it to
		case u.Status == http.StatusOK && u.Outcome == "duplicate" && u.Resent:
			// The unanswered first send was stored: checked below all the same.
		case u.Status != http.StatusOK || u.Outcome != "dead_lettered":
			rep.violation("payment %s with an unstorable user id answered %d %q, want 200 dead_lettered", u.EventID, u.Status, u.Outcome)
			bad++
			continue
		}
		var letters, credits int
		err := su.pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM dead_letters d JOIN webhook_events e ON e.correlation_id = d.correlation_id
			  WHERE e.provider = 'stripe' AND e.event_id = $1 AND d.source = 'ingest'
			    AND d.headers->>'payload_format' = 'psp_webhook' AND d.status = 'open'
			    AND position(convert_to($1, 'UTF8') in d.payload) > 0),
			(SELECT count(*) FROM ledger_transactions WHERE reference = $2)`, u.EventID, u.Reference).Scan(&letters, &credits)
		if err != nil {
			return err
		}
		if letters != 1 || credits != 0 {
			rep.violation("payment %s with an unstorable user id: %d open dead letters with its body (want 1), %d credits (want 0)",
				u.EventID, letters, credits)
			bad++
		}
	}
	for status, n := range d.registrations {
		if status != http.StatusCreated && status != http.StatusOK && status != 0 && status < 500 {
			rep.violation("%d destination registrations answered %d", n, status)
			bad++
		}
	}
	if bad == 0 {
		rep.passed("7. the second API client was refused all %d reaches into the first one's users (%d answered 403) and wrote nothing; "+
			"%d payments with an unstorable user id were answered, dead-lettered with their body and never credited",
			len(d.intrusions), refused, len(d.unstorable))
	}
	return nil
}
