package handler_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
)

// reviewedPaid takes a payout of 1500 to AWAITING_RESPONSE, has the PSP pay
// it, and parks it in NEEDS_REVIEW (as an exhausted retry whose outcome was
// unknown would be). It returns the payout and its PSP object.
func (w *world) reviewedPaid() (pid, ref string) {
	w.t.Helper()
	pid, ref = w.awaiting("ba_123")
	w.psp.Settle(w.t, ref, "paid")
	_, err := w.db.Pool.Exec(context.Background(), `UPDATE payouts SET status = 'NEEDS_REVIEW' WHERE id = $1`, pid)
	require.NoError(w.t, err)
	return pid, ref
}

// editListedPayouts makes the PSP's lookups answer each listed Stripe
// payout as edit leaves it.
func (w *world) editListedPayouts(edit func(po map[string]any)) {
	w.t.Helper()
	f := func(body []byte) []byte {
		var list map[string]any
		if json.Unmarshal(body, &list) != nil {
			return body
		}
		data, _ := list["data"].([]any)
		for _, o := range data {
			if po, ok := o.(map[string]any); ok {
				edit(po)
			}
		}
		out, err := json.Marshal(list)
		require.NoError(w.t, err)
		return out
	}
	w.pspProxy.rewriteLookups.Store(&f)
}

// refusedAsPaid asserts that a resolution was refused with why in its
// answer and that nothing moved: the hold is kept, nothing is settled.
func (w *world) refusedAsPaid(pid, rid, why string) {
	w.t.Helper()
	status, answer := w.resolution(rid)
	require.Equal(w.t, payout.ResolutionRefused, status, answer)
	require.Contains(w.t, answer, why)
	require.Equal(w.t, payout.NeedsReview, w.payout(pid).Status)
	require.Zero(w.t, w.postings(pid, "payout_settle"))
	require.EqualValues(w.t, 3500, w.balance(), "the hold is kept")
}

// Paid is applied only on the PSP's object for this payout: the object the
// operator names, for the payout's amount and currency, carrying its id.
func TestResolutionAsPaidIsRefusedWithoutThePSPsObject(t *testing.T) {
	t.Parallel()

	t.Run("the PSP has no object for the payout", func(t *testing.T) {
		t.Parallel()
		w := setup(t, options{})
		pid := w.reviewedMissing()
		rid := w.resolve(pid, "paid", "po_seen_on_dashboard", "")
		w.refusedAsPaid(pid, rid, "no object carrying this payout's id, so po_seen_on_dashboard cannot be its payment")
	})

	t.Run("a wrong object id", func(t *testing.T) {
		t.Parallel()
		w := setup(t, options{})
		pid, ref := w.reviewedPaid()
		rid := w.resolve(pid, "paid", "po_someone_else", "")
		w.refusedAsPaid(pid, rid, "the PSP's object for this payout is "+ref+", not po_someone_else")
	})

	t.Run("the object does not carry our payout id", func(t *testing.T) {
		t.Parallel()
		w := setup(t, options{})
		pid, ref := w.reviewedPaid()
		// The paid object the operator names is someone else's: its
		// metadata names another payout.
		w.editListedPayouts(func(po map[string]any) { po["metadata"] = map[string]any{"payout_id": "another-payout"} })
		rid := w.resolve(pid, "paid", ref, "")
		w.refusedAsPaid(pid, rid, "no object carrying this payout's id")
	})

	t.Run("a wrong amount", func(t *testing.T) {
		t.Parallel()
		w := setup(t, options{})
		pid, ref := w.reviewedPaid()
		w.editListedPayouts(func(po map[string]any) { po["amount"] = 1499 })
		rid := w.resolve(pid, "paid", ref, "")
		w.refusedAsPaid(pid, rid, "amount 1499, payout's 1500")
	})

	t.Run("an answer that does not state the amount and currency", func(t *testing.T) {
		t.Parallel()
		w := setup(t, options{})
		pid, ref := w.reviewedPaid()
		w.editListedPayouts(func(po map[string]any) { delete(po, "amount"); delete(po, "currency") })
		rid := w.resolve(pid, "paid", ref, "")
		w.refusedAsPaid(pid, rid, "amount 0, payout's 1500")
	})

	t.Run("the PSP's own object is applied", func(t *testing.T) {
		t.Parallel()
		w := setup(t, options{})
		pid, ref := w.reviewedPaid()
		rid := w.resolve(pid, "paid", ref, "")
		status, answer := w.resolution(rid)
		require.Equal(t, payout.ResolutionApplied, status, answer)
		require.Equal(t, payout.Succeeded, w.payout(pid).Status)
		require.Equal(t, 1, w.postings(pid, "payout_settle"))
	})
}

// Failed needs the PSP to say nothing is live: a payout sent again under a
// new key has a failed object and a live one, and the operator who names
// the failed one is refused while the other may still pay; the hold stays.
func TestResolutionAsFailedIsRefusedWhileThePSPHasALiveObject(t *testing.T) {
	t.Parallel()
	w := setup(t, options{})
	pid, live := w.awaiting("ba_123") // the PSP's object is pending
	// A second object for the same payout, created later, which failed.
	form := url.Values{"amount": {"1500"}, "currency": {"usd"}, "destination": {"ba_123"}, "metadata[payout_id]": {pid}}
	req, err := http.NewRequest(http.MethodPost, w.psp.URL+"/v1/payouts", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer sk_test_aegis")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Idempotency-Key", pid+":second")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var second struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&second))
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, strconv.Itoa(resp.StatusCode))
	require.NotEqual(t, live, second.ID)
	w.psp.Settle(t, second.ID, "failed")
	_, err = w.db.Pool.Exec(context.Background(), `UPDATE payouts SET status = 'NEEDS_REVIEW' WHERE id = $1`, pid)
	require.NoError(t, err)
	w.passSettleWindow()

	rid := w.resolve(pid, "failed", second.ID, "")
	status, answer := w.resolution(rid)
	require.Equal(t, payout.ResolutionRefused, status, answer)
	require.Contains(t, answer, "the PSP's object for this payout is "+live)
	require.Equal(t, payout.NeedsReview, w.payout(pid).Status)
	require.Zero(t, w.postings(pid, "payout_release"))
	require.EqualValues(t, 3500, w.balance(), "never given back while the PSP may pay")
}

// Without a client for the payout's provider the PSP's record cannot be
// read: neither paid nor failed is applied, and the hold stays.
func TestResolutionIsRefusedWithoutAClientForTheProvider(t *testing.T) {
	t.Parallel()
	w := setup(t, options{withoutPSP: "paystack"})
	w.fundWallet(5000)
	pid := w.createPayout(1500, "RCP_1", "paystack")
	// In review with its hold, as a payout whose provider was configured
	// when it was sent would be.
	fixture.Hold(pid, w.user, 1500).Insert(t, w.db.Pool)
	_, err := w.db.Pool.Exec(context.Background(), `UPDATE payouts SET status = 'NEEDS_REVIEW' WHERE id = $1`, pid)
	require.NoError(t, err)
	w.passSettleWindow()

	for _, outcome := range []string{"failed", "paid"} {
		rid := w.resolve(pid, outcome, "TRF_1", "")
		status, answer := w.resolution(rid)
		require.Equal(t, payout.ResolutionRefused, status, answer)
		require.Contains(t, answer, "no paystack client is configured")
		require.Equal(t, payout.NeedsReview, w.payout(pid).Status)
		require.EqualValues(t, 3500, w.balance(), "the hold is kept")
		require.Zero(t, w.postings(pid, "payout_release")+w.postings(pid, "payout_settle"))
	}
}
