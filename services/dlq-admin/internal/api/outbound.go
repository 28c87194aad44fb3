package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/outbound"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/endpoints"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
)

// The outbound routes (docs/design/outbound.md, "Management API"):
// endpoints, their secrets and the delivery log. The relay delivers;
// these only manage.

func mountOutbound(a *api, read, write chi.Router) {
	read.Get("/outbound/endpoints", a.listEndpoints)
	read.Get("/outbound/endpoints/{id}", a.getEndpoint)
	read.Get("/outbound/endpoints/{id}/deliveries", a.endpointDeliveries)
	read.Get("/outbound/endpoints/{id}/attempts", a.endpointAttempts)
	read.Get("/outbound/messages", a.listMessages)
	read.Get("/outbound/messages/{id}", a.getMessage)
	write.Post("/outbound/endpoints", a.createEndpoint)
	write.Patch("/outbound/endpoints/{id}", a.updateEndpoint)
	write.Delete("/outbound/endpoints/{id}", reasoned(a, a.uuidParam, reasonOptional, http.StatusOK,
		func(ctx context.Context, id uuid.UUID, actor, reason string) (any, error) {
			if err := a.Outbound.Delete(ctx, id, actor, reason); err != nil {
				return nil, err
			}
			return map[string]any{"id": id, "deleted": true}, nil
		}))
	write.Post("/outbound/endpoints/{id}/disable", reasoned(a, a.uuidParam, reasonRequired, http.StatusOK, a.Outbound.Disable))
	write.Post("/outbound/endpoints/{id}/enable", reasoned(a, a.uuidParam, reasonOptional, http.StatusOK, a.Outbound.Enable))
	// A secret is for operators only, and reading it is audited.
	write.Get("/outbound/endpoints/{id}/secret", a.endpointSecret)
	write.Post("/outbound/endpoints/{id}/rotate-secret", a.rotateSecret)
	write.Post("/outbound/endpoints/{id}/recover", a.recoverEndpoint)
	write.Post("/outbound/messages/{id}/resend", a.resendMessage)
	write.Post("/outbound/deliveries/{id}/resend", reasoned(a, a.idParam, reasonOptional, http.StatusOK, a.Outbound.ResendDelivery))
}

// createBody is POST /v1/outbound/endpoints's body.
type createBody struct {
	URL          string   `json:"url"`
	Description  string   `json:"description"`
	EventTypes   []string `json:"event_types"`
	RateLimit    *int     `json:"rate_limit"`
	LegacySecret *string  `json:"legacy_secret"`
}

// patchBody is PATCH /v1/outbound/endpoints/{id}'s body: a field absent
// is unchanged; rate_limit and legacy_secret null clear them.
type patchBody struct {
	URL          *string          `json:"url"`
	Description  *string          `json:"description"`
	EventTypes   *[]string        `json:"event_types"`
	RateLimit    nullable[int]    `json:"rate_limit"`
	LegacySecret nullable[string] `json:"legacy_secret"`
	Reason       string           `json:"reason"`
}

// nullable is a field that may be absent, null or a value.
type nullable[T any] struct{ endpoints.Optional[T] }

func (n *nullable[T]) UnmarshalJSON(b []byte) error {
	n.Set = true
	if string(b) == "null" {
		n.Value = nil
		return nil
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err //nolint:wrapcheck // decodeBody names the field from the *json.UnmarshalTypeError
	}
	n.Value = &v
	return nil
}

type rotateBody struct {
	Secret string `json:"secret"`
	Reason string `json:"reason"`
}

type recoverBody struct {
	Since  string `json:"since"`
	Reason string `json:"reason"`
}

type resendMessageBody struct {
	EndpointID string `json:"endpoint_id"`
	Reason     string `json:"reason"`
}

type scheduledView struct {
	Scheduled int64 `json:"scheduled"`
}

// uuidParam reads the {id} path parameter as an endpoint id, answering 400
// when it is not a UUID.
func (a *api) uuidParam(w http.ResponseWriter, r *http.Request) (uuid.UUID, bool) {
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		a.fail(w, r, &input.Invalid{Param: "id", Reason: "must be an endpoint id (a UUID)"})
		return uuid.UUID{}, false
	}
	return id, true
}

// beforeIDParam is the query's before_id: 0 when absent.
func beforeIDParam(r *http.Request) (int64, error) {
	v := r.URL.Query().Get("before_id")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, &input.Invalid{Param: "before_id", Reason: "must be a positive integer (next_before_id of the previous page)"}
	}
	return n, nil
}

// forReader is ep as the request's token may see it: operators the URL
// they manage, viewers only its scheme and host (receivers put tokens in
// paths and queries), as logs and the audit log show it.
func forReader(r *http.Request, ep endpoints.Endpoint) endpoints.Endpoint {
	if tok, ok := tokenFrom(r.Context()); !ok || tok.Role != RoleOperator {
		ep.URL = outbound.Redact(ep.URL)
	}
	return ep
}

func (a *api) listEndpoints(w http.ResponseWriter, r *http.Request) {
	eps, err := a.Outbound.List(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	for i := range eps {
		eps[i] = forReader(r, eps[i])
	}
	httpserver.WriteJSON(w, http.StatusOK, endpoints.Page[endpoints.Endpoint]{Items: eps})
}

func (a *api) getEndpoint(w http.ResponseWriter, r *http.Request) {
	id, ok := a.uuidParam(w, r)
	if !ok {
		return
	}
	ep, err := a.Outbound.Get(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, forReader(r, ep))
}

func (a *api) createEndpoint(w http.ResponseWriter, r *http.Request) {
	var body createBody
	if err := decodeBody(w, r, &body, false); err != nil {
		a.fail(w, r, err)
		return
	}
	ep, err := a.Outbound.Create(r.Context(), actor(r), endpoints.NewEndpoint{URL: body.URL, Description: body.Description,
		EventTypes: body.EventTypes, RateLimit: body.RateLimit, LegacySecret: body.LegacySecret})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/outbound/endpoints/"+ep.ID.String())
	httpserver.WriteJSON(w, http.StatusCreated, ep)
}

func (a *api) updateEndpoint(w http.ResponseWriter, r *http.Request) {
	id, ok := a.uuidParam(w, r)
	if !ok {
		return
	}
	var body patchBody
	if err := decodeBody(w, r, &body, false); err != nil {
		a.fail(w, r, err)
		return
	}
	ep, err := a.Outbound.Update(r.Context(), id, actor(r), endpoints.Change{URL: body.URL, Description: body.Description,
		EventTypes: body.EventTypes, RateLimit: body.RateLimit.Optional, LegacySecret: body.LegacySecret.Optional})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, ep)
}

func (a *api) endpointSecret(w http.ResponseWriter, r *http.Request) {
	id, ok := a.uuidParam(w, r)
	if !ok {
		return
	}
	s, err := a.Outbound.Secret(r.Context(), id, actor(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, s)
}

func (a *api) rotateSecret(w http.ResponseWriter, r *http.Request) {
	id, ok := a.uuidParam(w, r)
	if !ok {
		return
	}
	var body rotateBody
	if err := decodeBody(w, r, &body, true); err != nil {
		a.fail(w, r, err)
		return
	}
	s, err := a.Outbound.RotateSecret(r.Context(), id, actor(r), body.Secret, body.Reason)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, s)
}

func (a *api) recoverEndpoint(w http.ResponseWriter, r *http.Request) {
	id, ok := a.uuidParam(w, r)
	if !ok {
		return
	}
	var body recoverBody
	if err := decodeBody(w, r, &body, false); err != nil {
		a.fail(w, r, err)
		return
	}
	since, err := bodyTime("since", body.Since)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	n, err := a.Outbound.Recover(r.Context(), id, actor(r), since, body.Reason)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, scheduledView{Scheduled: n})
}

func (a *api) endpointDeliveries(w http.ResponseWriter, r *http.Request) {
	id, ok := a.uuidParam(w, r)
	if !ok {
		return
	}
	before, err := beforeIDParam(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	limit, err := limitParam(r.URL.Query(), 0, endpoints.MaxLimit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p, err := a.Outbound.Deliveries(r.Context(), id, r.URL.Query().Get("state"), before, limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, p)
}

func (a *api) endpointAttempts(w http.ResponseWriter, r *http.Request) {
	id, ok := a.uuidParam(w, r)
	if !ok {
		return
	}
	before, err := beforeIDParam(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	limit, err := limitParam(r.URL.Query(), 0, endpoints.MaxLimit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p, err := a.Outbound.Attempts(r.Context(), id, before, limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, p)
}

func (a *api) listMessages(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	before, err := beforeIDParam(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	limit, err := limitParam(q, 0, endpoints.MaxLimit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	p, err := a.Outbound.Messages(r.Context(), endpoints.MessageFilter{UserID: q.Get("user_id"), EventType: q.Get("event_type"),
		EventID: q.Get("event_id"), BeforeID: before, Limit: limit})
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, p)
}

func (a *api) getMessage(w http.ResponseWriter, r *http.Request) {
	id, ok := a.idParam(w, r)
	if !ok {
		return
	}
	m, err := a.Outbound.Message(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, m)
}

func (a *api) resendMessage(w http.ResponseWriter, r *http.Request) {
	id, ok := a.idParam(w, r)
	if !ok {
		return
	}
	var body resendMessageBody
	if err := decodeBody(w, r, &body, false); err != nil {
		a.fail(w, r, err)
		return
	}
	ep, err := uuid.Parse(body.EndpointID)
	if err != nil {
		a.fail(w, r, &input.Invalid{Param: "endpoint_id", Reason: "must be an endpoint id (a UUID)"})
		return
	}
	d, err := a.Outbound.ResendMessage(r.Context(), id, ep, actor(r), body.Reason)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, d)
}
