package chaos

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

// webhook is one webhook the workload sent, with its final answer.
type webhook struct {
	Provider string
	EventID  string
	Kind     string // credit, twin, duplicate, none, stale, bad_signature, malformed
	// Reference is the payment's ledger reference for credits, and User,
	// Amount and Currency what it must credit.
	Reference string
	User      string
	Amount    int64
	Currency  string
	Status    int
	// AckedAt is when the answer arrived (pickup latency).
	AckedAt time.Time
}

// payoutReq is one payout request and its answer.
type payoutReq struct {
	Key  string
	Body string
	// External is the external account its Stripe connected account
	// destination is registered with ("" for a transfer alone, or Paystack).
	External string
	Status   int
	PayoutID string
	// Expect is what a repeated key should get: the same payout or a 422.
	Expect string
}

// workload drives the suite like PSPs and an API client would, and records
// every final answer for the invariants.
type workload struct {
	api, secret, paystackKey, token string
	rng                             *rand.Rand
	users                           int
	client                          *http.Client

	// door is the front-door workload (frontdoor.go).
	door frontDoor
	// evidence is the PSP-evidence workload (evidence.go).
	evidence evidenceLog

	mu       sync.Mutex
	webhooks []*webhook
	payouts  []*payoutReq
	seq      int
	sent     map[string]int
	// poison is the poison workload's overflowing credit (poison.go).
	poison *webhook
	// back is the money-back workload (moneyback.go).
	back moneyBackLog
	// forged are the forged money events (forged.go, week profile).
	forged []forgedEvent
}

func newWorkload(api, stripeSecret, paystackKey, token string, seed uint64, users int) *workload {
	return &workload{api: api, secret: stripeSecret, paystackKey: paystackKey, token: token,
		rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), users: users, sent: map[string]int{},
		client: &http.Client{Timeout: 10 * time.Second}}
}

func (w *workload) user(n int) string { return fmt.Sprintf("chaos-u%03d", n%w.users) }

// run sends operations at rate per second until ctx ends. The decisions come
// from the seeded source in order, so a seed replays the same workload.
func (w *workload) run(ctx context.Context, rate int) {
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
		op := w.next()
		wg.Add(1)
		go func() { defer wg.Done(); op() }()
	}
}

// next draws the next operation.
func (w *workload) next() func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq++
	n := w.seq
	r := w.rng.Float64()
	u := w.user(w.rng.IntN(w.users))
	amount := int64(500 + w.rng.IntN(4500))
	if op := w.frontDoorOp(n, u); op != nil {
		return op
	}
	if op := w.evidenceOp(n, u); op != nil {
		return op
	}
	if op := w.moneyBackOp(n); op != nil {
		return op
	}
	switch {
	case r < 0.36: // a Stripe payment; sometimes its twin event, sometimes sent twice
		twin, dup := w.rng.Float64() < 0.15, w.rng.Float64() < 0.1
		return func() { w.stripePayment(n, u, amount, twin, dup) }
	case r < 0.46:
		return func() { w.paystackPayment(n, u, amount*100) }
	case r < 0.50:
		return func() { w.badSignature(n, u) }
	case r < 0.53:
		return func() { w.malformed(n) }
	case r < 0.56:
		return func() { w.ignoredEvent(n) }
	case r < 0.90:
		return w.payoutOp(n, u)
	default:
		return func() { w.staleFinalisation(n) }
	}
}

func (w *workload) record(h *webhook) {
	if h.AckedAt.IsZero() {
		h.AckedAt = time.Now()
	}
	w.mu.Lock()
	w.webhooks = append(w.webhooks, h)
	w.sent[h.Kind]++
	w.mu.Unlock()
}

func (w *workload) stripeEvent(id, typ string, created int64, object string) []byte {
	return w.stripeEventOf("", id, typ, created, object)
}

// stripeEventOf is a Stripe event sent for connected account account (its
// top-level "account"), or for the platform when account is empty.
func (w *workload) stripeEventOf(account, id, typ string, created int64, object string) []byte {
	of := ""
	if account != "" {
		of = fmt.Sprintf(`,"account":%q`, account)
	}
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","api_version":"2024-06-20","created":%d,"type":%q,"data":{"object":%s},"livemode":false%s}`,
		id, created, typ, object, of))
}

func (w *workload) stripePayment(n int, user string, amount int64, twin, dup bool) {
	pi := fmt.Sprintf("pi_chaos_%d", n)
	id := fmt.Sprintf("evt_chaos_%d", n)
	obj := fmt.Sprintf(`{"id":%q,"object":"payment_intent","amount":%d,"amount_received":%d,"currency":"usd","status":"succeeded","metadata":{"user_id":%q}}`,
		pi, amount, amount, user)
	body := w.stripeEvent(id, "payment_intent.succeeded", time.Now().Unix(), obj)
	pay := func(kind, eventID string, status int) *webhook {
		return &webhook{Provider: "stripe", EventID: eventID, Kind: kind, Reference: "stripe:" + pi, User: user,
			Amount: amount, Currency: "usd", Status: status}
	}
	credit := pay("credit", id, w.sendStripe(body))
	w.record(credit)
	if credit.Status/100 == 2 {
		w.paid(pi, user, amount)
	}
	if dup {
		w.record(pay("duplicate", id, w.sendStripe(body)))
	}
	if twin {
		cid := fmt.Sprintf("evt_chaos_%d_ch", n)
		ch := fmt.Sprintf(`{"id":"ch_chaos_%d","object":"charge","amount":%d,"amount_captured":%d,"captured":true,"currency":"usd","payment_intent":%q,"status":"succeeded","metadata":{"user_id":%q}}`,
			n, amount, amount, pi, user)
		w.record(pay("twin", cid, w.sendStripe(w.stripeEvent(cid, "charge.succeeded", time.Now().Unix(), ch))))
	}
}

func (w *workload) paystackPayment(n int, user string, amount int64) {
	ref := fmt.Sprintf("ps_chaos_%d", n)
	body := []byte(fmt.Sprintf(`{"event":"charge.success","data":{"id":%d,"reference":%q,"amount":%d,"currency":"NGN","status":"success","paid_at":%q,"metadata":{"user_id":%q}}}`,
		900000+n, ref, amount, time.Now().UTC().Format(time.RFC3339), user))
	w.record(&webhook{Provider: "paystack", EventID: fmt.Sprintf("charge.success:%d", 900000+n), Kind: "credit",
		Reference: "paystack:" + ref, User: user, Amount: amount, Currency: "ngn", Status: w.sendPaystack(body)})
}

func (w *workload) badSignature(n int, user string) {
	id := fmt.Sprintf("evt_chaos_bad_%d", n)
	body := w.stripeEvent(id, "payment_intent.succeeded", time.Now().Unix(),
		fmt.Sprintf(`{"id":"pi_bad_%d","amount":100,"currency":"usd","metadata":{"user_id":%q}}`, n, user))
	status := w.post("/webhooks/stripe", body, map[string]string{"Stripe-Signature": fmt.Sprintf("t=%d,v1=%s", time.Now().Unix(), hex.EncodeToString(make([]byte, 32)))}, false)
	w.record(&webhook{Provider: "stripe", EventID: id, Kind: "bad_signature", Status: status})
}

func (w *workload) malformed(n int) {
	body := []byte(fmt.Sprintf(`{"id":"evt_chaos_malformed_%d","type":`, n))
	w.record(&webhook{Provider: "stripe", EventID: fmt.Sprintf("evt_chaos_malformed_%d", n), Kind: "malformed", Status: w.sendStripe(body)})
}

func (w *workload) ignoredEvent(n int) {
	id := fmt.Sprintf("evt_chaos_cus_%d", n)
	w.record(&webhook{Provider: "stripe", EventID: id, Kind: "none",
		Status: w.sendStripe(w.stripeEvent(id, "customer.created", time.Now().Unix(), fmt.Sprintf(`{"id":"cus_%d","object":"customer"}`, n)))})
}

// payoutOp draws a payout request: new, or a repeat of an earlier key.
func (w *workload) payoutOp(n int, user string) func() {
	if len(w.payouts) > 5 && w.rng.Float64() < 0.12 {
		prev := w.payouts[w.rng.IntN(len(w.payouts))]
		if w.rng.Float64() < 0.6 {
			return func() { w.payout(prev.Key, prev.Body, prev.External, "same") }
		}
		var b map[string]any
		_ = json.Unmarshal([]byte(prev.Body), &b)
		b["amount"] = b["amount"].(float64) + 1 // the same key for another request
		other, _ := json.Marshal(b)
		return func() { w.payout(prev.Key, string(other), prev.External, "conflict") }
	}
	r := w.rng.Float64()
	// A Stripe payout goes to a connected account: by a transfer alone, or
	// by a transfer and then the account's payout to its external account,
	// pending until the account's payout.paid.
	provider, currency, dest, external := "stripe", "usd", fmt.Sprintf("acct_chaos_%d", n), fmt.Sprintf("ba_chaos_%d", n)
	switch {
	case r < 0.08:
		dest, external = "acct_invalid_chaos", "" // the transfer is refused
	case r < 0.10:
		// The transfer settles failed: the PSP reverses it, and its
		// transfer.reversed gives the money back.
		dest, external = fmt.Sprintf("acct_fail_chaos_%d", n), ""
	case r < 0.12:
		// The transfer is paid, then the connected account's payout fails:
		// NEEDS_REVIEW until the operator reverses the transfer
		// (faultConnectedPayoutFailed, connect.go).
		external = fmt.Sprintf("ba_fail_chaos_%d", n)
		w.sent[faultConnectedPayoutFailed]++
	case r < 0.16:
		dest, external = fmt.Sprintf("acct_chaos_t%d", n), "" // a transfer: final at once
	case r < 0.26:
		provider, currency, dest, external = "paystack", "ngn", fmt.Sprintf("RCP_chaos_%d", n), ""
	}
	amount := 100 + w.rng.IntN(1900)
	if currency == "ngn" {
		amount *= 100
	}
	body := fmt.Sprintf(`{"user_id":%q,"amount":%d,"currency":%q,"destination":%q,"provider":%q}`, user, amount, currency, dest, provider)
	key := fmt.Sprintf("chaos-key-%d", n)
	p := &payoutReq{Key: key, Body: body, External: external, Expect: "new"}
	w.payouts = append(w.payouts, p)
	return func() { w.payout(key, body, external, "new") }
}

// fundedPaystackPayout credits user amount naira (minor units) by a
// Paystack payment, then asks for a Paystack payout of it: one that has
// the balance to reach the PSP (the OTP fault's own payouts, week.go).
// Its choices are the caller's, so the seeded workload is not disturbed.
func (w *workload) fundedPaystackPayout(user string, amount int64) {
	w.mu.Lock()
	w.seq++
	n := w.seq
	body := fmt.Sprintf(`{"user_id":%q,"amount":%d,"currency":"ngn","destination":"RCP_chaos_%d","provider":"paystack"}`, user, amount, n)
	key := fmt.Sprintf("chaos-key-%d", n)
	w.payouts = append(w.payouts, &payoutReq{Key: key, Body: body, Expect: "new"})
	w.mu.Unlock()
	w.paystackPayment(n, user, amount)
	w.payout(key, body, "", "new")
}

// payout registers body's destination (with external, the connected
// account's external account, if any) and asks for the payout under key.
func (w *workload) payout(key, body, external, expect string) {
	w.registerDestination(body, external)
	h := map[string]string{"Authorization": "Bearer " + w.token, "Idempotency-Key": key, "Content-Type": "application/json"}
	var status int
	var answer map[string]any
	for attempt := 0; attempt < 6; attempt++ {
		status, answer = w.postJSON("/v1/payouts", []byte(body), h)
		if status != 0 && status < 500 {
			break
		}
		time.Sleep(time.Duration(attempt+1) * 500 * time.Millisecond) // a client retrying with its key
	}
	id, _ := answer["payout_id"].(string)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sent["payout_"+expect]++
	if expect == "new" {
		// Only the new request's own entry: a repeat of its key drawn while
		// it was still in flight has its own answer (a conflict answered 422
		// before the first request's 202 must stay 422).
		for _, p := range w.payouts {
			if p.Key == key && p.Expect == "new" {
				p.Status, p.PayoutID = status, id
			}
		}
		return
	}
	w.payouts = append(w.payouts, &payoutReq{Key: key, Body: body, External: external, Status: status, PayoutID: id, Expect: expect})
}

// staleFinalisation resends, under a new event id and an older time, the
// finalisation of a payout that the PSP already finished: a replayed old
// event that must change nothing.
func (w *workload) staleFinalisation(n int) {
	w.mu.Lock()
	var candidates []*payoutReq
	for _, p := range w.payouts {
		if p.Expect == "new" && p.PayoutID != "" {
			candidates = append(candidates, p)
		}
	}
	var pick *payoutReq
	if len(candidates) > 0 {
		pick = candidates[w.rng.IntN(len(candidates))]
	}
	w.mu.Unlock()
	if pick == nil {
		return
	}
	status, p := w.getJSON("/v1/payouts/" + pick.PayoutID)
	ref, _ := p["psp_reference"].(string)
	st, _ := p["status"].(string)
	if status != 200 || ref == "" || !payoutstate.Status(st).Closed() || !stringsHasPrefix(ref, "po_") {
		return
	}
	typ := "payout.failed"
	if payoutstate.Status(st) == payoutstate.Finalized {
		typ = "payout.paid"
	}
	id := fmt.Sprintf("evt_chaos_stale_%d", n)
	// The payout's own amount: a stale event that matches its payout, so it
	// is refused for its age and not as a mismatch (evidence.go sends those).
	amount, _ := p["amount"].(float64)
	obj := fmt.Sprintf(`{"id":%q,"object":"payout","amount":%d,"currency":"usd","status":%q,"metadata":{"payout_id":%q}}`,
		ref, int64(amount), typ[len("payout."):], pick.PayoutID)
	old := time.Now().Add(-48 * time.Hour).Unix()
	// A payout paid out on a connected account: its events come from it.
	var account string
	if pick.External != "" {
		account, _ = p["destination"].(string)
	}
	w.record(&webhook{Provider: "stripe", EventID: id, Kind: "stale", Status: w.sendStripe(w.stripeEventOf(account, id, typ, old, obj))})
}

func stringsHasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// sendStripe posts a signed Stripe webhook, retrying 5xx and connection
// errors as Stripe does, and returns the final status (0: never answered).
func (w *workload) sendStripe(body []byte) int {
	return w.post("/webhooks/stripe", body, nil, true)
}

func (w *workload) sendPaystack(body []byte) int {
	return w.post("/webhooks/paystack", body, map[string]string{"x-paystack-signature": psp.PaystackSignature(w.paystackKey, body)}, false)
}

func (w *workload) post(path string, body []byte, headers map[string]string, sign bool) int {
	var status int
	retryLikeAPSP(func() int {
		h := map[string]string{"Content-Type": "application/json"}
		for k, v := range headers {
			h[k] = v
		}
		if sign {
			h["Stripe-Signature"] = signStripe(w.secret, body)
		}
		status, _ = w.postJSON(path, body, h)
		return status
	})
	return status
}

// pspRetryFor is how long the workload keeps redelivering a webhook that
// was not answered or answered 5xx. Stripe and Paystack retry for days; a
// minute and a half outlasts every injected outage and the 503s with which
// webhook-api sheds load it cannot commit within its line, so an event
// never answered here is one the suite really refused, not one a slow
// machine made the workload give up on.
const pspRetryFor = 90 * time.Second

// retryLikeAPSP sends until the answer is below 500, waiting 0.5 s more
// after each try (at most 5 s) for pspRetryFor; it returns how many sends
// it took.
func retryLikeAPSP(send func() int) (sends int) {
	start := time.Now()
	for {
		sends++
		if status := send(); status != 0 && status < 500 {
			return sends
		}
		if time.Since(start) >= pspRetryFor {
			return sends
		}
		time.Sleep(min(time.Duration(sends)*500*time.Millisecond, 5*time.Second))
	}
}

func (w *workload) postJSON(path string, body []byte, headers map[string]string) (int, map[string]any) {
	req, err := http.NewRequest(http.MethodPost, w.api+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

func (w *workload) getJSON(path string) (int, map[string]any) {
	req, _ := http.NewRequest(http.MethodGet, w.api+path, nil)
	req.Header.Set("Authorization", "Bearer "+w.token)
	resp, err := w.client.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}
