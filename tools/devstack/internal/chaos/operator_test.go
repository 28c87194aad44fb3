package chaos

import (
	"strings"
	"testing"
)

// goodPaid and goodFailed are resolutions as the worker applies them.
func goodPaid() resolvedPayout {
	return resolvedPayout{Resolution: "r1", PayoutID: "p1", Outcome: "paid", Status: "applied", Object: "po_1",
		RequestedBy: "ops", PayoutStatus: "SUCCEEDED", Audits: 1, Holds: 1, Settles: 1}
}

func goodFailed() resolvedPayout {
	return resolvedPayout{Resolution: "r2", PayoutID: "p2", Outcome: "failed", Status: "applied", Object: "po_2",
		RequestedBy: "ops", ApprovedBy: "ops2", ApprovalAudits: 1, PayoutStatus: "FINALIZED", Audits: 1, Holds: 1, Releases: 1}
}

func pspRecord() map[string][]pspObject {
	return map[string][]pspObject{
		"p1": {{ID: "po_1", PayoutID: "p1", Status: "paid"}},
		"p2": {{ID: "po_2", PayoutID: "p2", Status: "failed"}},
	}
}

func TestJudgeResolutionsAcceptsResolutionsThatMatchThePSPAndTheLedger(t *testing.T) {
	if v := judgeResolutions([]resolvedPayout{goodPaid(), goodFailed()}, pspRecord()); len(v) != 0 {
		t.Fatalf("violations for correct resolutions: %v", v)
	}
}

// Each planted defect must be named: the invariant can fail.
func TestJudgeResolutionsNamesEveryPlantedDefect(t *testing.T) {
	cases := []struct {
		name  string
		plant func(*resolvedPayout, map[string][]pspObject)
		want  string
	}{
		{"resolved failed while the PSP paid", func(r *resolvedPayout, psp map[string][]pspObject) {
			*r = goodFailed()
			r.PayoutID = "p1" // the PSP paid p1
		}, "but the PSP paid it: true"},
		{"resolved paid while the PSP failed it", func(r *resolvedPayout, psp map[string][]pspObject) {
			r.PayoutID = "p2"
		}, "but the PSP paid it: false"},
		{"resolved paid with nothing at the PSP", func(r *resolvedPayout, psp map[string][]pspObject) {
			delete(psp, "p1")
		}, "but the PSP paid it: false"},
		{"no audit_log row", func(r *resolvedPayout, _ map[string][]pspObject) { r.Audits = 0 }, "no audit_log row"},
		{"approved by its requester", func(r *resolvedPayout, _ map[string][]pspObject) {
			r.ApprovedBy, r.ApprovalAudits = "ops", 1
		}, "approved by \"ops\""},
		{"approval not audited", func(r *resolvedPayout, _ map[string][]pspObject) {
			r.ApprovedBy = "ops2"
		}, "0 approval audit rows"},
		{"hold settled twice", func(r *resolvedPayout, _ map[string][]pspObject) { r.Settles = 2 }, "settled 2 times"},
		{"paid and released", func(r *resolvedPayout, _ map[string][]pspObject) { r.Releases = 1 }, "released 1 times"},
		{"failed and never released", func(r *resolvedPayout, _ map[string][]pspObject) {
			*r = goodFailed()
			r.Releases = 0
		}, "released 0 times"},
		{"applied but the payout did not move", func(r *resolvedPayout, _ map[string][]pspObject) {
			r.PayoutStatus = "NEEDS_REVIEW"
		}, "is NEEDS_REVIEW"},
		{"hold left on the holds account", func(r *resolvedPayout, _ map[string][]pspObject) { r.HoldBalance = 700 }, "700 left on the holds account"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, psp := goodPaid(), pspRecord()
			c.plant(&r, psp)
			v := judgeResolutions([]resolvedPayout{r}, psp)
			if len(v) == 0 || !strings.Contains(strings.Join(v, "\n"), c.want) {
				t.Fatalf("violations %q, want one containing %q", v, c.want)
			}
		})
	}
}

// A refused resolution moved nothing and is not held to the PSP's record
// (the worker refused it because the record disagreed), but it must still
// be audited.
func TestJudgeResolutionsHoldsRefusalsOnlyToTheirAudit(t *testing.T) {
	r := goodFailed()
	r.PayoutID, r.Status, r.PayoutStatus, r.Releases = "p1", "refused", "NEEDS_REVIEW", 0
	if v := judgeResolutions([]resolvedPayout{r}, pspRecord()); len(v) != 0 {
		t.Fatalf("violations for a refused resolution: %v", v)
	}
	r.Audits = 0
	if v := judgeResolutions([]resolvedPayout{r}, pspRecord()); len(v) != 1 {
		t.Fatalf("violations for an unaudited refusal: %v, want 1", v)
	}
}

func TestDecideFromPSPResolvesOnlyWhatThePSPRecordSays(t *testing.T) {
	refused := pspCall{PayoutID: "p", RequestID: "req_1", Method: "POST", Status: 400, Outcome: "invalid_account"}
	cases := []struct {
		name    string
		objs    []pspObject
		calls   []pspCall
		outcome string // "" = left
		object  string
	}{
		{"paid", []pspObject{{ID: "po_1", Status: "paid"}}, nil, "paid", "po_1"},
		{"paystack success", []pspObject{{ID: "TRF_1", Status: "success"}}, nil, "paid", "TRF_1"},
		{"failed", []pspObject{{ID: "po_2", Status: "failed", FailureCode: "account_closed"}}, nil, "failed", "po_2"},
		{"failed then paid", []pspObject{{ID: "po_2", Status: "failed"}, {ID: "po_3", Status: "paid"}}, nil, "paid", "po_3"},
		{"connected payout paid after its transfer", []pspObject{{ID: "tr_1", Kind: "transfer", Status: "paid"},
			{ID: "po_7", Kind: "payout", Account: "acct_1", Status: "paid"}}, nil, "paid", "po_7"},
		{"connected payout pending after its transfer", []pspObject{{ID: "tr_2", Kind: "transfer", Status: "paid"},
			{ID: "po_8", Kind: "payout", Account: "acct_1", Status: "pending"}}, nil, "", ""},
		{"pending", []pspObject{{ID: "po_4", Status: "pending"}}, nil, "", ""},
		{"two live", []pspObject{{ID: "po_5", Status: "paid"}, {ID: "po_6", Status: "paid"}}, nil, "", ""},
		{"refused at creation", nil, []pspCall{refused, refused}, "failed", "req_1"},
		{"a request whose outcome is unknown", nil, []pspCall{refused, {PayoutID: "p", RequestID: "req_2", Method: "POST", Status: 504}}, "", ""},
		{"a request never answered", nil, []pspCall{{PayoutID: "p", RequestID: "req_3", Method: "POST"}}, "", ""},
		{"nothing at all", nil, nil, "", ""},
		{"only lookups", nil, []pspCall{{PayoutID: "p", RequestID: "req_4", Method: "GET", Status: 200}}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, ok := decideFromPSP(c.objs, c.calls)
			if c.outcome == "" {
				if ok {
					t.Fatalf("resolved %s with %s on a record that does not say; want it left", v.outcome, v.object)
				}
				if v.reason == "" {
					t.Fatal("left without saying why")
				}
				return
			}
			if !ok || v.outcome != c.outcome || v.object != c.object || v.reason == "" {
				t.Fatalf("got %+v %v, want %s with %s and a reason", v, ok, c.outcome, c.object)
			}
		})
	}
}
