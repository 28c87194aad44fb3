package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/erasure"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
)

// Personal-data erasure of one user (package erasure). The user id travels
// in the request body, never in a URL: paths are logged, bodies are not.

func mountErasures(a *api, viewer, operator chi.Router) {
	viewer.Get("/erasures", a.listErasures)
	viewer.Get("/erasures/{id}", a.getErasure)
	operator.Post("/erasures", a.requestErasure)
}

type erasureBody struct {
	UserID string `json:"user_id"`
	Reason string `json:"reason"`
}

type erasureView struct {
	ID          int64           `json:"id"`
	Pseudonym   string          `json:"pseudonym"`
	Status      string          `json:"status"`
	Reason      string          `json:"reason"`
	RequestedBy string          `json:"requested_by"`
	ApprovalID  *int64          `json:"approval_id"`
	ApprovedBy  *string         `json:"approved_by"`
	Rows        json.RawMessage `json:"rows"`
	RequestedAt time.Time       `json:"requested_at"`
	DecidedAt   *time.Time      `json:"decided_at"`
}

func newErasureView(e erasure.Erasure) erasureView {
	v := erasureView{ID: e.ID, Pseudonym: e.Pseudonym, Status: e.Status, Reason: e.Reason, RequestedBy: e.RequestedBy,
		ApprovalID: e.ApprovalID, ApprovedBy: e.ApprovedBy, Rows: e.Counts, RequestedAt: e.RequestedAt.UTC()}
	if len(v.Rows) == 0 {
		v.Rows = json.RawMessage("null")
	}
	if e.DecidedAt != nil {
		t := e.DecidedAt.UTC()
		v.DecidedAt = &t
	}
	return v
}

// erasureHeldView answers a request: the erasure and the approval a second
// operator gives.
type erasureHeldView struct {
	Erasure  erasureView  `json:"erasure"`
	Approval approvalView `json:"approval"`
}

func (a *api) requestErasure(w http.ResponseWriter, r *http.Request) {
	var body erasureBody
	if err := decodeBody(w, r, &body, false); err != nil {
		a.fail(w, r, err)
		return
	}
	e, ap, err := a.Erasures.Request(r.Context(), actor(r), body.UserID, body.Reason)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/erasures/"+strconv.FormatInt(e.ID, 10))
	httpserver.WriteJSON(w, http.StatusAccepted, erasureHeldView{Erasure: newErasureView(e), Approval: newApprovalView(ap)})
}

func (a *api) getErasure(w http.ResponseWriter, r *http.Request) {
	id, ok := a.idParam(w, r)
	if !ok {
		return
	}
	e, err := a.Erasures.Get(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, newErasureView(e))
}

type erasureListView struct {
	Items []erasureView `json:"items"`
}

func (a *api) listErasures(w http.ResponseWriter, r *http.Request) {
	limit, err := limitParam(r.URL.Query(), 0, input.MaxLimit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	list, err := a.Erasures.List(r.Context(), limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := erasureListView{Items: make([]erasureView, 0, len(list))}
	for _, e := range list {
		out.Items = append(out.Items, newErasureView(e))
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
}
