package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/approval"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/payouts"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/resolution"
)

// The payouts list, operator resolutions of NEEDS_REVIEW payouts and the
// four-eyes approvals (package approval).

func mountResolutions(a *api, viewer, operator chi.Router) {
	viewer.Get("/payouts", a.listPayouts)
	viewer.Get("/payouts/{id}/resolutions", a.payoutResolutions)
	viewer.Get("/resolutions/{id}", a.getResolution)
	viewer.Get("/approvals", a.listApprovals)
	viewer.Get("/approvals/{id}", a.getApproval)
	operator.Post("/payouts/{id}/resolve", a.resolvePayout)
	operator.Post("/payouts/{id}/paystack-otp", a.finalizeOTP)
	operator.Post("/approvals/{id}/approve", a.approve)
	operator.Post("/approvals/{id}/reject", a.reject)
}

type payoutSummaryView struct {
	ID               string    `json:"id"`
	UserID           string    `json:"user_id"`
	Amount           int64     `json:"amount"`
	Currency         string    `json:"currency"`
	Provider         string    `json:"provider"`
	Destination      string    `json:"destination"`
	Status           string    `json:"status"`
	PSPReference     *string   `json:"psp_reference"`
	PSPStatus        *string   `json:"psp_status"`
	LastError        *string   `json:"last_error"`
	ErrorClass       *string   `json:"error_class"`
	DeadLetterID     *int64    `json:"dead_letter_id"`
	DeadLetter       *string   `json:"dead_letter"`
	ResolutionID     *string   `json:"resolution_id"`
	ResolutionStatus *string   `json:"resolution_status"`
	CreatedAt        time.Time `json:"created_at"`
	UpdatedAt        time.Time `json:"updated_at"`
}

type payoutListView struct {
	Items      []payoutSummaryView `json:"items"`
	NextCursor string              `json:"next_cursor"`
}

func (a *api) listPayouts(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := limitParam(q, 0, input.MaxLimit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	f := payouts.PayoutFilter{Status: q.Get("status"), Cursor: q.Get("cursor"), Limit: limit}
	items, next, err := a.Payouts.List(r.Context(), f)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := payoutListView{Items: make([]payoutSummaryView, 0, len(items)), NextCursor: next}
	for _, p := range items {
		v := payoutSummaryView{ID: p.ID, UserID: p.UserID, Amount: p.Amount, Currency: p.Currency, Provider: p.Provider,
			Destination: p.Destination, Status: p.Status, PSPReference: p.PSPReference, PSPStatus: p.PSPStatus,
			LastError: p.LastError, ErrorClass: p.ErrorClass, DeadLetterID: p.DeadLetterID,
			ResolutionID: p.ResolutionID, ResolutionStatus: p.ResolutionStatus,
			CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC()}
		if p.DeadLetterID != nil {
			link := "/v1/dead-letters/" + strconv.FormatInt(*p.DeadLetterID, 10)
			v.DeadLetter = &link
		}
		out.Items = append(out.Items, v)
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
}

type resolveBody struct {
	Outcome     string `json:"outcome"`
	Reason      string `json:"reason"`
	PSPObjectID string `json:"psp_object_id"`
}

type resolutionView struct {
	ID          string     `json:"id"`
	PayoutID    string     `json:"payout_id"`
	UserID      string     `json:"user_id"`
	Outcome     string     `json:"outcome"`
	Reason      string     `json:"reason"`
	PSPObjectID string     `json:"psp_object_id"`
	RequestedBy string     `json:"requested_by"`
	Status      string     `json:"status"`
	PSPAnswer   *string    `json:"psp_answer"`
	ApprovedBy  *string    `json:"approved_by"`
	ApprovalID  *int64     `json:"approval_id"`
	CreatedAt   time.Time  `json:"created_at"`
	DecidedAt   *time.Time `json:"decided_at"`
}

func newResolutionView(r resolution.Resolution) resolutionView {
	v := resolutionView{ID: r.ID, PayoutID: r.PayoutID, UserID: r.UserID, Outcome: r.Outcome, Reason: r.Reason,
		PSPObjectID: r.PSPObjectID, RequestedBy: r.RequestedBy, Status: r.Status, PSPAnswer: r.PSPAnswer,
		ApprovedBy: r.ApprovedBy, ApprovalID: r.ApprovalID, CreatedAt: r.CreatedAt.UTC()}
	if r.DecidedAt != nil {
		t := r.DecidedAt.UTC()
		v.DecidedAt = &t
	}
	return v
}

func (a *api) payoutIDParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := chi.URLParam(r, "id")
	if !uuidPattern.MatchString(id) {
		a.fail(w, r, &input.Invalid{Param: "id", Reason: "must be a payout id (a UUID)"})
		return "", false
	}
	return id, true
}

func (a *api) resolvePayout(w http.ResponseWriter, r *http.Request) {
	id, ok := a.payoutIDParam(w, r)
	if !ok {
		return
	}
	var body resolveBody
	if err := decodeBody(w, r, &body, false); err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.Resolutions.Resolve(r.Context(), id, actor(r),
		resolution.Request{Outcome: body.Outcome, Reason: body.Reason, PSPObjectID: body.PSPObjectID})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/resolutions/"+res.ID)
	httpserver.WriteJSON(w, http.StatusAccepted, newResolutionView(res))
}

func (a *api) getResolution(w http.ResponseWriter, r *http.Request) {
	res, err := a.Resolutions.Get(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, newResolutionView(res))
}

type resolutionListView struct {
	Items []resolutionView `json:"items"`
}

func (a *api) payoutResolutions(w http.ResponseWriter, r *http.Request) {
	id, ok := a.payoutIDParam(w, r)
	if !ok {
		return
	}
	list, err := a.Resolutions.ForPayout(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := resolutionListView{Items: make([]resolutionView, 0, len(list))}
	for _, res := range list {
		out.Items = append(out.Items, newResolutionView(res))
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
}

type approvalView struct {
	ID             int64      `json:"id"`
	Kind           string     `json:"kind"`
	TargetID       *string    `json:"target_id"`
	Summary        string     `json:"summary"`
	RequestedBy    string     `json:"requested_by"`
	Status         string     `json:"status"`
	DecidedBy      *string    `json:"decided_by"`
	DecisionReason *string    `json:"decision_reason"`
	ResultID       *string    `json:"result_id"`
	CreatedAt      time.Time  `json:"created_at"`
	DecidedAt      *time.Time `json:"decided_at"`
}

func newApprovalView(ap approval.Approval) approvalView {
	v := approvalView{ID: ap.ID, Kind: ap.Kind, TargetID: nonEmpty(ap.TargetID), Summary: ap.Summary, RequestedBy: ap.RequestedBy,
		Status: ap.Status, DecidedBy: ap.DecidedBy, DecisionReason: ap.DecisionReason, ResultID: ap.ResultID,
		CreatedAt: ap.CreatedAt.UTC()}
	if ap.DecidedAt != nil {
		t := ap.DecidedAt.UTC()
		v.DecidedAt = &t
	}
	return v
}

type approvalListView struct {
	Items []approvalView `json:"items"`
}

func (a *api) listApprovals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	status := q.Get("status")
	if !q.Has("status") {
		status = approval.StatusPending // what waits for someone
	}
	limit, err := limitParam(q, 0, input.MaxLimit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	list, err := a.Approvals.Approvals(r.Context(), status, limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := approvalListView{Items: make([]approvalView, 0, len(list))}
	for _, ap := range list {
		out.Items = append(out.Items, newApprovalView(ap))
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
}

func (a *api) getApproval(w http.ResponseWriter, r *http.Request) {
	id, ok := a.idParam(w, r)
	if !ok {
		return
	}
	ap, err := a.Approvals.Approval(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, newApprovalView(ap))
}

func (a *api) approve(w http.ResponseWriter, r *http.Request) { a.decideApproval(w, r, true) }

func (a *api) reject(w http.ResponseWriter, r *http.Request) { a.decideApproval(w, r, false) }

func (a *api) decideApproval(w http.ResponseWriter, r *http.Request, approve bool) {
	id, ok := a.idParam(w, r)
	if !ok {
		return
	}
	var body reasonBody
	if err := decodeBody(w, r, &body, approve); err != nil {
		a.fail(w, r, err)
		return
	}
	decide := a.Approvals.Reject
	if approve {
		decide = a.Approvals.Approve
	}
	ap, err := decide(r.Context(), id, actor(r), body.Reason)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, newApprovalView(ap))
}

// heldView answers a bulk replay that waits for a second operator.
type heldView struct {
	Approval approvalView `json:"approval"`
}

type otpBody struct {
	OTP string `json:"otp"`
}

// finalizeOTP enters the OTP Paystack sent for a payout's transfer
// (package otp); the transfer's own events then settle the payout.
func (a *api) finalizeOTP(w http.ResponseWriter, r *http.Request) {
	id, ok := a.payoutIDParam(w, r)
	if !ok {
		return
	}
	var body otpBody
	if err := decodeBody(w, r, &body, false); err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.OTP.Finalize(r.Context(), actor(r), id, body.OTP)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.Logger.InfoContext(r.Context(), "paystack OTP accepted", "payout_id", id, "transfer_code", res.TransferCode,
		"actor", actor(r))
	httpserver.WriteJSON(w, http.StatusOK, res)
}
