package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/tools/devstack/internal/stack"
)

// Operator resolutions ("Ops resolve what machines can't"): what
// machines cannot settle ends NEEDS_REVIEW with its hold kept, and a person
// settles it from the PSP's own record. After the drain and the replay, the
// run plants a few such payouts (plantReviews: every PSP call slower than
// the workers' call timeout, lookups included, and the payout webhooks
// lost, so retries run out on an unknown outcome), then an operator works
// the review queue through dlq-admin's API with a bearer token of the
// operator role: it lists NEEDS_REVIEW payouts, looks each one up in the PSP
// stand-in's record (what a person does in the Stripe or Paystack
// dashboard) and resolves it paid with the PSP's payout id, or failed with
// the evidence that nothing was paid (the failed object, or the refused
// request). A payout whose PSP record is unknown (still pending, more than
// one live object, nothing at all) is left and reported: resolving on a
// guess is forbidden. The first pass resolves payouts up to
// fourEyesAbove with dlq-admin as configured by default; dlq-admin is then
// restarted with REQUIRE_SECOND_APPROVER=true, and the second pass resolves
// the rest, each approved by a second operator's token. Invariant 12
// (checkResolutions) then holds every resolution to the PSP's record and
// the ledger, and invariant 3 wants no payout left non-final.

const (
	opsToken = "dev-ops-token-0123456789"
	// secondOpsToken is the second operator of four-eyes approvals.
	secondOpsToken = "chaos-ops2-token-0123456789"
	// chaosDLQAdminTokens: the operator, the second operator, a viewer.
	chaosDLQAdminTokens = "ops:operator:" + opsToken + ",ops2:operator:" + secondOpsToken +
		",night:viewer:dev-viewer-token-0123456789"
	// fourEyesAbove: resolutions of payouts above this amount are made
	// with four-eyes on.
	fourEyesAbove = 2000
	// reviewPayouts is how many payouts plantReviews makes: each kind
	// (paid, failed after creation, refused) below and above fourEyesAbove.
	reviewPayouts = 6
	// reviewUser is the wallet the planted review payouts come from.
	reviewUser = "chaos-review"
)

// OperatorReport is what the operator did.
type OperatorReport struct {
	// Planted is how many review payouts plantReviews created, and
	// PlantedInReview how many of them reached NEEDS_REVIEW.
	Planted, PlantedInReview int
	// Listed counts NEEDS_REVIEW payouts seen in dlq-admin's list (over
	// all passes).
	Listed int
	// Resolved counts resolutions applied by the worker, by outcome.
	Resolved map[string]int
	// Approved counts resolutions a second operator approved (four-eyes).
	Approved int
	// Refused counts resolutions the worker refused because the PSP's
	// record disagreed: evidence, reported, never hidden.
	Refused []string
	// Replayed counts payouts the PSP never received a request for, whose
	// dead letter the operator replayed (nothing to resolve: the replay
	// looks the payout up and sends it).
	Replayed int
	// Reversed counts payouts in review whose connected payout failed or
	// was refused after the transfer, whose transfer the operator reversed
	// (reverseConnectedFailures).
	Reversed int
	// Left names payouts left in review because the PSP's record did not
	// say what happened.
	Left []string
	// Disabled: the run was told not to resolve anything (-no-operator).
	Disabled bool
}

type pspCall struct {
	PayoutID  string `json:"payout_id"`
	RequestID string `json:"request_id"`
	Method    string `json:"method"`
	Path      string `json:"path"`
	Outcome   string `json:"outcome"`
	Status    int    `json:"status"`
}

// verdict is what an operator decided from the PSP's record.
type verdict struct {
	outcome, object, reason string
	// neverSent: the PSP has no object and no request for the payout, so
	// there is nothing to resolve; a person replays its dead letter (the
	// replay looks the payout up first and sends only if the PSP has
	// nothing).
	neverSent bool
}

// decideFromPSP says how a person holding the PSP's record resolves a
// payout: paid when the PSP holds exactly one live object for it and that
// object is paid; failed when every object it holds for it failed, or when
// it holds none and refused every request it received for it; nothing
// (ok false, with why) otherwise.
//
// A payout to a connected account's external account is its transfer and
// then that account's payout: once the latter exists it alone says whether
// the payout was paid (the transfer only moved the money to the account).
func decideFromPSP(objs []pspObject, calls []pspCall) (verdict, bool) {
	var connected []pspObject
	for _, o := range objs {
		if o.Account != "" {
			connected = append(connected, o)
		}
	}
	if len(connected) > 0 {
		objs = connected
	}
	var live, failed []pspObject
	for _, o := range objs {
		if o.Status == "failed" {
			failed = append(failed, o)
		} else {
			live = append(live, o)
		}
	}
	switch {
	case len(live) > 1:
		return verdict{reason: fmt.Sprintf("the PSP holds %d live objects for it", len(live))}, false
	case len(live) == 1 && paid(live[0]):
		return verdict{outcome: "paid", object: live[0].ID,
			reason: fmt.Sprintf("chaos operator: PSP record shows %s %s paid %d %s", live[0].Kind, live[0].ID, live[0].Amount, live[0].Currency)}, true
	case len(live) == 1:
		return verdict{reason: fmt.Sprintf("the PSP's object %s is %q, not final", live[0].ID, live[0].Status)}, false
	case len(failed) > 0:
		o := failed[len(failed)-1]
		return verdict{outcome: "failed", object: o.ID,
			reason: fmt.Sprintf("chaos operator: PSP record shows %s %s failed (%s), nothing live", o.Kind, o.ID, o.FailureCode)}, true
	}
	// No object at all: nothing was paid only if every request the PSP
	// received for the payout was answered with a refusal.
	var last *pspCall
	for i := range calls {
		c := &calls[i]
		if c.Method != http.MethodPost {
			continue
		}
		// No answer, a success or a 5xx (Stripe saves a 5xx once execution
		// began) may have moved money; a 409 (the key was in use) or a 429
		// executed nothing itself.
		if c.Status == 0 || c.Status/100 == 2 || c.Status >= 500 {
			return verdict{reason: fmt.Sprintf("no object, and request %s was answered %d (%s): its outcome is not a refusal", c.RequestID, c.Status, c.Outcome)}, false
		}
		last = c
	}
	if last == nil || last.RequestID == "" {
		return verdict{reason: "the PSP has no object and no request for it", neverSent: true}, false
	}
	return verdict{outcome: "failed", object: last.RequestID,
		reason: fmt.Sprintf("chaos operator: PSP has no object; request %s was refused %d (%s)", last.RequestID, last.Status, last.Outcome)}, true
}

// plantReviews makes n payouts whose outcome the workers cannot learn: a
// credited wallet, then, while every PSP request takes longer than
// PSP_CALL_TIMEOUT and payout webhooks are lost, payouts to a destination
// that pays, one that fails after creation and one refused at creation. It
// waits until each is NEEDS_REVIEW or finished, then clears the faults.
func (su *suite) plantReviews(ctx context.Context, in *injector, wl *workload, n int, op *OperatorReport) error {
	if n == 0 {
		return nil
	}
	var total int64
	amounts := make([]int64, n)
	for i := range amounts {
		amounts[i] = int64(500 + 37*i)
		if i%2 == 1 {
			amounts[i] = int64(fourEyesAbove + 500 + 41*i)
		}
		total += amounts[i]
	}
	wl.stripePayment(990_000, reviewUser, total+1000, false, false)
	if err := waitFor(ctx, time.Minute, func() (bool, error) {
		status, w := wl.getJSON("/v1/wallets/" + reviewUser)
		bal, _ := w["balance"].(float64)
		return status == http.StatusOK && int64(bal) >= total, nil
	}); err != nil {
		return fmt.Errorf("the review wallet was not credited: %w", err)
	}
	// Transfers to connected accounts, each one object at the PSP: one
	// that pays, one that settles failed (the PSP reverses it), one refused
	// at creation. Registered before the faults: a registration asks the
	// PSP about the account, and would time out under them.
	bodies := make([]string, len(amounts))
	for i, amt := range amounts {
		dest := fmt.Sprintf("acct_review_%d", i)
		switch i % 3 {
		case 1:
			dest = fmt.Sprintf("acct_fail_review_%d", i) // created, then fails at the PSP
		case 2:
			dest = fmt.Sprintf("acct_invalid_review_%d", i) // refused at creation
		}
		bodies[i] = fmt.Sprintf(`{"user_id":%q,"amount":%d,"currency":"usd","destination":%q,"provider":"stripe"}`, reviewUser, amt, dest)
		wl.registerDestination(bodies[i], "")
	}
	if err := in.pspFaults(`{"latency":"2500ms","drop_webhook_rate":1}`); err != nil {
		return err
	}
	defer func() { _ = in.pspFaults("") }()
	var ids []string
	for i, body := range bodies {
		key := fmt.Sprintf("chaos-review-key-%d", i)
		p := &payoutReq{Key: key, Body: body, Expect: "new"}
		wl.mu.Lock()
		wl.payouts = append(wl.payouts, p)
		wl.mu.Unlock()
		wl.payout(key, body, "", "new")
		wl.mu.Lock()
		id := p.PayoutID
		wl.mu.Unlock()
		if id != "" {
			ids = append(ids, id)
		}
	}
	op.Planted = len(ids)
	planted := time.Now()
	// One wallet's payouts are worked one after another (they share a
	// partition key), each until its retries run out: about 20 s apiece.
	err := waitFor(ctx, 4*time.Minute, func() (bool, error) {
		var open int
		err := su.pool.QueryRow(ctx, `SELECT count(*) FROM payouts WHERE id::text = ANY($1)
			AND status NOT IN ('NEEDS_REVIEW', 'SUCCEEDED', 'FINALIZED')`, ids).Scan(&open)
		return open == 0, err
	})
	if err != nil {
		su.cfg.log("planted review payouts: %v", err)
	}
	if err := su.pool.QueryRow(ctx, `SELECT count(*) FROM payouts WHERE id::text = ANY($1) AND status = 'NEEDS_REVIEW'`,
		ids).Scan(&op.PlantedInReview); err != nil {
		return err
	}
	su.cfg.log("planted %d payouts with unknown outcomes; %d are NEEDS_REVIEW after %s", len(ids), op.PlantedInReview,
		time.Since(planted).Round(time.Second))
	// An operator does not resolve failed while a request whose outcome
	// is unknown may still be executing at the PSP: the worker would
	// refuse it until PSP_SETTLE_WINDOW (3s in the run) has passed.
	_ = in.pspFaults("")
	sleep(ctx, 4*time.Second)
	return nil
}

// operate is the operator: the transfers of payouts whose connected payout
// failed reversed (connect.go), a pass with dlq-admin as it runs (payouts
// up to fourEyesAbove), dlq-admin restarted with four-eyes on, and a pass over
// everything still in review, each resolution approved by a second
// operator.
func (su *suite) operate(ctx context.Context, op *OperatorReport) error {
	if err := su.reverseConnectedFailures(ctx, op); err != nil {
		return err
	}
	if err := su.operatorPass(ctx, fourEyesAbove, false, op); err != nil {
		return err
	}
	if err := su.s.Terminate("dlq-admin", 15*time.Second); err != nil {
		su.cfg.log("dlq-admin stop: %v", err)
	}
	if err := su.s.RestartWith(ctx, "dlq-admin", stack.URL(su.ports.DLQAdmin)+"/readyz",
		map[string]string{"REQUIRE_SECOND_APPROVER": "true"}); err != nil {
		return err
	}
	su.cfg.log("dlq-admin restarted with REQUIRE_SECOND_APPROVER=true")
	return su.operatorPass(ctx, -1, true, op)
}

// operatorPass lists NEEDS_REVIEW payouts (amount up to maxAmount, or all
// when it is negative), resolves each one the PSP's record decides, and
// waits for the worker's verdicts.
func (su *suite) operatorPass(ctx context.Context, maxAmount int64, fourEyes bool, op *OperatorReport) error {
	dlq := stack.URL(su.ports.DLQAdmin)
	type item struct {
		ID               string             `json:"id"`
		Amount           int64              `json:"amount"`
		Status           payoutstate.Status `json:"status"`
		ResolutionStatus *string            `json:"resolution_status"`
		DeadLetterID     *int64             `json:"dead_letter_id"`
	}
	var review []item
	cursor := ""
	for {
		var page struct {
			Items      []item `json:"items"`
			NextCursor string `json:"next_cursor"`
		}
		u := dlq + "/v1/payouts?status=" + string(payoutstate.NeedsReview) + "&limit=100"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		if err := getJSON(ctx, u, opsToken, &page); err != nil {
			return err
		}
		review = append(review, page.Items...)
		if page.NextCursor == "" || len(page.Items) == 0 {
			break
		}
		cursor = page.NextCursor
	}
	var calls struct {
		Items []pspCall `json:"items"`
	}
	if err := getJSON(ctx, stack.URL(su.ports.PSP)+"/_psp/calls", "", &calls); err != nil {
		return err
	}
	callsOf := map[string][]pspCall{}
	for _, c := range calls.Items {
		if c.PayoutID != "" {
			callsOf[c.PayoutID] = append(callsOf[c.PayoutID], c)
		}
	}
	started, before := time.Now(), len(op.Left)
	pending := map[string]string{} // resolution id → payout id
	replays := map[string]bool{}   // payouts whose dead letter was replayed
	for _, p := range review {
		if p.Status != payoutstate.NeedsReview || (maxAmount >= 0 && p.Amount > maxAmount) {
			continue
		}
		op.Listed++
		if p.ResolutionStatus != nil && (*p.ResolutionStatus == "pending" || *p.ResolutionStatus == "awaiting_approval") {
			continue
		}
		var objs struct {
			Items []pspObject `json:"items"`
		}
		if err := getJSON(ctx, stack.URL(su.ports.PSP)+"/_psp/objects?payout_id="+url.QueryEscape(p.ID), "", &objs); err != nil {
			return err
		}
		v, ok := decideFromPSP(objs.Items, callsOf[p.ID])
		if !ok && v.neverSent && p.DeadLetterID != nil {
			replayed, err := su.replayOne(ctx, *p.DeadLetterID)
			if err != nil {
				return err
			}
			if replayed {
				op.Replayed++
				replays[p.ID] = true
				continue
			}
		}
		if !ok {
			op.Left = append(op.Left, p.ID+": "+v.reason)
			continue
		}
		status, res, err := opCall(ctx, http.MethodPost, dlq+"/v1/payouts/"+p.ID+"/resolve", opsToken,
			map[string]string{"outcome": v.outcome, "reason": v.reason, "psp_object_id": v.object})
		if err != nil {
			return err
		}
		if status == http.StatusConflict {
			continue // no longer in review, or already being resolved
		}
		if status != http.StatusAccepted {
			op.Left = append(op.Left, fmt.Sprintf("%s: resolve answered %d %v", p.ID, status, res))
			continue
		}
		rid, _ := res["id"].(string)
		if res["status"] == "awaiting_approval" {
			aid, _ := res["approval_id"].(float64)
			if !fourEyes || aid == 0 {
				return fmt.Errorf("resolution %s of payout %s awaits approval %v unexpectedly", rid, p.ID, res["approval_id"])
			}
			// The requester may not approve: dlq-admin must answer 403.
			if st, _, err := opCall(ctx, http.MethodPost, fmt.Sprintf("%s/v1/approvals/%d/approve", dlq, int64(aid)), opsToken,
				map[string]string{"reason": "self-approval"}); err != nil {
				return err
			} else if st != http.StatusForbidden {
				return fmt.Errorf("approval %d approved by its own requester answered %d, want 403", int64(aid), st)
			}
			st, body, err := opCall(ctx, http.MethodPost, fmt.Sprintf("%s/v1/approvals/%d/approve", dlq, int64(aid)), secondOpsToken,
				map[string]string{"reason": "chaos second operator: checked the PSP record too"})
			if err != nil {
				return err
			}
			if st != http.StatusOK {
				return fmt.Errorf("approval %d by the second operator answered %d %v", int64(aid), st, body)
			}
			op.Approved++
		} else if fourEyes {
			return fmt.Errorf("resolution %s of payout %s is %v with four-eyes on", rid, p.ID, res["status"])
		}
		pending[rid] = p.ID
	}
	// The worker's verdicts, and the replayed payouts finished.
	sent := len(pending)
	defer func() {
		su.cfg.log("operator pass (four-eyes %t): %d listed, %d resolutions sent, %d left, %s", fourEyes, len(review), sent,
			len(op.Left)-before, time.Since(started).Round(time.Second))
	}()
	return waitFor(ctx, 2*time.Minute, func() (bool, error) {
		for rid, pid := range pending {
			var r map[string]any
			if err := getJSON(ctx, dlq+"/v1/resolutions/"+rid, opsToken, &r); err != nil {
				return false, nil // dlq-admin may be briefly unavailable; ask again
			}
			switch r["status"] {
			case "applied":
				if op.Resolved == nil {
					op.Resolved = map[string]int{}
				}
				op.Resolved[fmt.Sprint(r["outcome"])]++
				delete(pending, rid)
			case "refused", "rejected":
				op.Refused = append(op.Refused, fmt.Sprintf("%s (%s): %v", pid, r["status"], r["psp_answer"]))
				delete(pending, rid)
			}
		}
		for pid := range replays {
			var status payoutstate.Status
			if err := su.pool.QueryRow(ctx, `SELECT status FROM payouts WHERE id::text = $1`, pid).Scan(&status); err != nil {
				return false, nil // Postgres may be briefly unavailable; ask again
			}
			if status.Closed() {
				delete(replays, pid)
			}
		}
		return len(pending) == 0 && len(replays) == 0, nil
	})
}

// resolvedPayout is one resolution with what the ledger and audit_log hold
// for it (checkResolutions).
type resolvedPayout struct {
	Resolution, PayoutID, Outcome, Status, Object string
	RequestedBy, ApprovedBy                       string
	PayoutStatus                                  payoutstate.Status
	Audits, ApprovalAudits                        int
	Holds, Settles, Releases                      int
	HoldBalance                                   int64
}

// judgeResolutions returns the violations of invariant 12 among rows,
// given the PSP's objects by payout id: every applied resolution has its
// audit_log row (and, approved, its approval's by another operator),
// matches the PSP's record (resolved paid ⇔ the PSP paid it), and moved
// the ledger once: paid → hold settled once, never released; failed → hold
// released once, never settled; either way the hold nets to zero.
func judgeResolutions(rows []resolvedPayout, objs map[string][]pspObject) []string {
	var out []string
	for _, r := range rows {
		if r.Audits == 0 {
			out = append(out, fmt.Sprintf("resolution %s of payout %s has no audit_log row", r.Resolution, r.PayoutID))
		}
		if r.ApprovedBy != "" && (r.ApprovedBy == r.RequestedBy || r.ApprovalAudits == 0) {
			out = append(out, fmt.Sprintf("resolution %s of payout %s approved by %q (requested by %q) with %d approval audit rows",
				r.Resolution, r.PayoutID, r.ApprovedBy, r.RequestedBy, r.ApprovalAudits))
		}
		if r.Status != "applied" {
			continue
		}
		pspPaid := false
		for _, o := range objs[r.PayoutID] {
			if paid(o) {
				pspPaid = true
			}
		}
		if pspPaid != (r.Outcome == "paid") {
			out = append(out, fmt.Sprintf("payout %s resolved %s (evidence %s) but the PSP paid it: %v", r.PayoutID, r.Outcome, r.Object, pspPaid))
		}
		switch r.Outcome {
		case "paid":
			if r.PayoutStatus != payoutstate.Succeeded || r.Settles != 1 || r.Releases != 0 {
				out = append(out, fmt.Sprintf("payout %s resolved paid is %s with its hold settled %d times and released %d times",
					r.PayoutID, r.PayoutStatus, r.Settles, r.Releases))
			}
		case "failed":
			if r.PayoutStatus != payoutstate.Finalized || r.Releases != 1 || r.Settles != 0 {
				out = append(out, fmt.Sprintf("payout %s resolved failed is %s with its hold released %d times and settled %d times",
					r.PayoutID, r.PayoutStatus, r.Releases, r.Settles))
			}
		}
		if r.Holds != 1 || r.HoldBalance != 0 {
			out = append(out, fmt.Sprintf("payout %s resolved %s: %d holds, %d left on the holds account", r.PayoutID, r.Outcome, r.Holds, r.HoldBalance))
		}
	}
	return out
}

const sqlResolvedPayouts = `
SELECT r.id::text, r.payout_id::text, r.outcome, r.status, r.psp_object_id, r.requested_by, coalesce(r.approved_by, ''), p.status,
       (SELECT count(*) FROM audit_log a WHERE a.action = 'payout_resolve' AND a.target_type = 'payout'
          AND a.target_id = r.payout_id::text AND a.detail->>'resolution_id' = r.id::text),
       (SELECT count(*) FROM audit_log a JOIN approvals ap ON a.target_id = ap.id::text
          WHERE a.action = 'approve' AND a.target_type = 'approval' AND ap.target_id = r.id::text),
       (SELECT count(*) FROM ledger_transactions t WHERE t.kind = 'payout_hold' AND t.reference = r.payout_id::text),
       (SELECT count(*) FROM ledger_transactions t WHERE t.kind = 'payout_settle' AND t.reference = r.payout_id::text),
       (SELECT count(*) FROM ledger_transactions t WHERE t.kind = 'payout_release' AND t.reference = r.payout_id::text),
       (SELECT coalesce(sum(e.amount), 0)::bigint FROM ledger_entries e JOIN ledger_transactions t ON t.id = e.transaction_id
          JOIN wallets w ON w.id = e.wallet_id
          WHERE w.kind = 'system' AND w.owner = 'payout_holds' AND t.reference = r.payout_id::text)
FROM payout_resolutions_state r JOIN payouts p ON p.id = r.payout_id
ORDER BY r.created_at`

// checkResolutions: 12. Every operator resolution is audited, matches the
// PSP's record and moved the ledger exactly once (judgeResolutions);
// refusals by the worker's PSP check are reported, not hidden.
func (su *suite) checkResolutions(ctx context.Context, _ *workload, rep *Report) error {
	rows, err := su.pool.Query(ctx, sqlResolvedPayouts)
	if err != nil {
		return err
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (resolvedPayout, error) {
		var r resolvedPayout
		err := row.Scan(&r.Resolution, &r.PayoutID, &r.Outcome, &r.Status, &r.Object, &r.RequestedBy, &r.ApprovedBy,
			&r.PayoutStatus, &r.Audits, &r.ApprovalAudits, &r.Holds, &r.Settles, &r.Releases, &r.HoldBalance)
		return r, err
	})
	if err != nil {
		return err
	}
	objs, err := su.pspObjects(ctx)
	if err != nil {
		return err
	}
	byPayout := map[string][]pspObject{}
	for _, o := range objs {
		byPayout[o.PayoutID] = append(byPayout[o.PayoutID], o)
	}
	bad := judgeResolutions(list, byPayout)
	for _, v := range bad {
		rep.violation("%s", v)
	}
	statuses := map[string]int{}
	approved := 0
	for _, r := range list {
		statuses[r.Status+" "+r.Outcome]++
		if r.ApprovedBy != "" {
			approved++
		}
	}
	if len(bad) == 0 {
		var parts []string
		for _, k := range sortedKeys(statuses) {
			parts = append(parts, fmt.Sprintf("%s %d", k, statuses[k]))
		}
		rep.passed("12. %d operator resolutions (%s; %d approved by a second operator) each audited, matching the PSP's record, "+
			"the hold settled or released exactly once and netting to zero", len(list), strings.Join(parts, ", "), approved)
	}
	return nil
}

// opCall sends an operator's JSON request to dlq-admin with token.
func opCall(ctx context.Context, method, u, token string, body any) (int, map[string]any, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, u, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out, nil
}

// waitFor polls cond every 500 ms until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not done after %s", timeout)
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

// operatorLines renders the operator's figures for the report.
func (op *OperatorReport) lines() []string {
	if op == nil {
		return nil
	}
	var out []string
	if op.Disabled {
		out = append(out, "operator disabled (-no-operator): NEEDS_REVIEW payouts are left to invariant 3")
	}
	out = append(out, fmt.Sprintf("operator: %d review payouts planted (%d reached NEEDS_REVIEW); %d transfers reversed whose connected payout failed or was refused; %d NEEDS_REVIEW listed; resolved %v; %d approved by a second operator; %d refused by the worker's PSP check; %d never sent, their dead letter replayed; %d left (PSP record unknown)",
		op.Planted, op.PlantedInReview, op.Reversed, op.Listed, op.Resolved, op.Approved, len(op.Refused), op.Replayed, len(op.Left)))
	sort.Strings(op.Refused)
	for _, r := range op.Refused {
		out = append(out, "  refused: "+r)
	}
	for _, l := range op.Left {
		out = append(out, "  left: "+l)
	}
	return out
}
