package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/aegis-payments/aegis/tools/devstack/internal/stack"
)

// Missed webhooks: the fault psp_money_back_webhooks_dropped has
// customers pay at the PSP stand-in and take money back (a refund, a
// dispute won or lost) while the stand-in loses every payment, refund and
// dispute webhook for good. The PSP's record keeps them, so only the PSP
// reconciliation, requested from dlq-admin before the drain, recovers them.
// They then join the workload's record as acknowledged when the run
// finished, and the money invariants (1, 11) hold them to the same
// standard: credited once, each refund and dispute in the ledger once with
// its outcome, every wallet accounted for.

// pspPayment is a payment made at the stand-in while its webhooks were lost.
type pspPayment struct {
	pi, user string
	amount   int64
	back     []*moneyBack
}

type missedLog struct {
	mu       sync.Mutex
	seq      int
	payments []*pspPayment
}

func (in *injector) pspPost(path string, body any, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	resp, err := http.Post(in.psp+path, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("PSP %s answered %d: %s", path, resp.StatusCode, raw)
	}
	return json.Unmarshal(raw, out)
}

// dropMoneyBack is the fault: two or three payments, each with a refund or
// a dispute, all of whose webhooks are lost.
func (in *injector) dropMoneyBack(ctx context.Context) error {
	if err := in.pspFaults(`{"provider":"stripe","drop_payment_webhook_rate":1}`); err != nil {
		return err
	}
	defer func() { _ = in.pspFaults("") }()
	n := 2 + in.rng.IntN(2)
	for range n {
		in.missed.mu.Lock()
		in.missed.seq++
		seq := in.missed.seq
		in.missed.mu.Unlock()
		p := &pspPayment{user: fmt.Sprintf("recon-%d", seq), amount: int64(1000 + in.rng.IntN(9000))}
		var pay struct {
			ID string `json:"id"`
		}
		if err := in.pspPost("/_psp/payments", map[string]any{"provider": "stripe", "user_id": p.user, "amount": p.amount, "currency": "usd"}, &pay); err != nil {
			return err
		}
		p.pi = pay.ID
		part := max(1, p.amount/int64(2+in.rng.IntN(3)))
		o := &moneyBack{Payment: "stripe:" + p.pi, User: p.user, Amount: part, Acked: true}
		var ret struct {
			ID string `json:"id"`
		}
		switch r := in.rng.Float64(); {
		case r < 0.5:
			o.Kind, o.Outcome = "refund", "refunded"
			if err := in.pspPost("/_psp/payments/"+p.pi+"/refunds", map[string]any{"amount": part}, &ret); err != nil {
				return err
			}
		default:
			o.Kind, o.Outcome = "dispute", "won"
			if r > 0.75 {
				o.Outcome = "lost"
			}
			if err := in.pspPost("/_psp/payments/"+p.pi+"/disputes", map[string]any{"amount": part, "outcome": o.Outcome}, &ret); err != nil {
				return err
			}
		}
		o.ID = ret.ID
		p.back = append(p.back, o)
		in.missed.mu.Lock()
		in.missed.payments = append(in.missed.payments, p)
		in.missed.mu.Unlock()
		sleep(ctx, time.Duration(200+in.rng.IntN(500))*time.Millisecond)
	}
	return nil
}

// reconcilePSP requests a PSP reconciliation from dlq-admin (as an
// operator would), waits for webhook-api to finish it, and adds what it
// had to recover to the workload's record.
func (su *suite) reconcilePSP(ctx context.Context, in *injector, wl *workload) error {
	in.missed.mu.Lock()
	missed := append([]*pspPayment(nil), in.missed.payments...)
	in.missed.mu.Unlock()
	// The payment events' ids, from the stand-in's delivery record.
	var deliveries struct {
		Items []struct {
			EventID  string `json:"event_id"`
			Type     string `json:"type"`
			ObjectID string `json:"object_id"`
			State    string `json:"state"`
		} `json:"items"`
	}
	if err := getJSON(ctx, in.psp+"/_psp/webhooks", "", &deliveries); err != nil {
		return err
	}
	byPI := map[string]string{}
	for _, d := range deliveries.Items {
		if d.Type == "payment_intent.succeeded" {
			byPI[d.ObjectID] = d.EventID
		}
	}
	dlq := stack.URL(su.ports.DLQAdmin)
	var run map[string]any
	deadline := time.Now().Add(3 * time.Minute)
	for {
		status, body, err := su.opRequest(ctx, http.MethodPost, dlq+"/v1/psp-reconciliation")
		if err != nil {
			return err
		}
		if status == http.StatusAccepted {
			run = body
			break
		}
		// 409: a scheduled run is active; a fresh one must follow it.
		if status != http.StatusConflict && status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return fmt.Errorf("POST /v1/psp-reconciliation answered %d %v", status, body)
		}
		sleep(ctx, 500*time.Millisecond)
	}
	id := int64(run["run_id"].(float64))
	for run["status"] != "succeeded" && run["status"] != "failed" {
		if time.Now().After(deadline) {
			return fmt.Errorf("PSP reconciliation run %d not finished after 3m: %v", id, run["status"])
		}
		sleep(ctx, 300*time.Millisecond)
		status, body, err := su.opRequest(ctx, http.MethodGet, fmt.Sprintf("%s/v1/psp-reconciliation/%d", dlq, id))
		if err != nil {
			return err
		}
		if status == http.StatusOK {
			run = body
		}
	}
	su.cfg.log("PSP reconciliation run %d %s: %v events found, %v recovered, %v disagreements",
		id, run["status"], run["events_found"], run["events_recovered"], run["disagreement_count"])
	if run["status"] != "succeeded" {
		return fmt.Errorf("PSP reconciliation run %d failed: %v", id, run["error"])
	}
	finished := time.Now()
	for _, p := range missed {
		eventID := byPI[p.pi]
		if eventID == "" {
			return fmt.Errorf("no payment_intent.succeeded for %s in the stand-in's record", p.pi)
		}
		wl.record(&webhook{Provider: "stripe", EventID: eventID, Kind: "credit", Reference: "stripe:" + p.pi,
			User: p.user, Amount: p.amount, Currency: "usd", Status: http.StatusOK, AckedAt: finished})
		wl.back.mu.Lock()
		wl.back.objects = append(wl.back.objects, p.back...)
		wl.back.mu.Unlock()
	}
	return nil
}

func (su *suite) opRequest(ctx context.Context, method, url string) (int, map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+opsToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var body map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &body)
	return resp.StatusCode, body, nil
}

func getJSON(ctx context.Context, url, token string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("GET %s answered %d", url, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}
