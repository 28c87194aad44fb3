package api

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/aegis-payments/aegis/pkg/bearer"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/approval"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/endpoints"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/erasure"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/pspruns"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/recon"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/otp"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/payouts"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/resolution"
)

// Deps is what the API needs.
type Deps struct {
	Logger *slog.Logger
	Store  *store.Store
	// Payouts reads the payouts a letter or a review is about.
	Payouts *payouts.Reader
	// Replay resolves letters and runs bulk replays (the write routes).
	Replay *replay.Service
	// Recon is the ledger integrity check.
	Recon *recon.Reconciler
	// PSPRuns requests and reads PSP reconciliation runs (webhook-api
	// works them).
	PSPRuns *pspruns.Store
	// Resolutions resolves NEEDS_REVIEW payouts (resolutions.go).
	Resolutions *resolution.Service
	// Approvals lists and decides the requests held for a second operator.
	Approvals *approval.Gate
	// OTP enters the OTPs of Paystack transfers waiting for one.
	OTP *otp.Finalizer
	// Erasures erases a user's personal data, four-eyes (erasures.go).
	Erasures *erasure.Service
	// Outbound manages the outbound endpoints and reads their delivery log
	// (outbound.go).
	Outbound *endpoints.Service
	// Tokens are DLQ_ADMIN_TOKENS; an empty set refuses every /v1 request.
	Tokens *bearer.Set
	Now    func() time.Time
}

type api struct{ Deps }

// Mount adds the /v1 routes to r.
func Mount(r chi.Router, d Deps) {
	a := &api{d}
	r.Route("/v1", func(r chi.Router) {
		// Wraps the whole subrouter, unknown /v1 paths included: nothing
		// under /v1 answers without a token.
		r.Use(a.authenticate)
		mountResolutions(a, r.With(a.requireRole(RoleViewer)), r.With(a.requireRole(RoleOperator)))
		mountOutbound(a, r.With(a.requireRole(RoleViewer)), r.With(a.requireRole(RoleOperator)))
		mountErasures(a, r.With(a.requireRole(RoleViewer)), r.With(a.requireRole(RoleOperator)))
		r.Group(func(r chi.Router) {
			r.Use(a.requireRole(RoleViewer))
			r.Get("/me", a.me)
			r.Get("/dead-letters", a.list)
			r.Get("/dead-letters/groups", a.groups)
			// Registered before {id} for readers; chi prefers the static
			// segment either way, so "stats" is never taken for an id.
			r.Get("/dead-letters/stats", a.stats)
			r.Get("/dead-letters/{id}", a.get)
			r.Get("/payouts/{id}", a.payout)
			r.Get("/replay-jobs", a.listJobs)
			r.Get("/replay-jobs/{id}", a.getJob)
			r.Get("/replay-jobs/{id}/letters", a.jobLetters)
			r.Get("/reconciliation", a.latestReconciliation)
			r.Get("/psp-reconciliation", a.latestPSPRun)
			r.Get("/psp-reconciliation/{id}", a.getPSPRun)
		})
		r.Group(func(r chi.Router) {
			r.Use(a.requireRole(RoleOperator))
			// A static segment again: "replay" is never taken for an id.
			r.Post("/dead-letters/replay", a.bulkReplay)
			r.Post("/dead-letters/discard", a.bulkDiscard)
			r.Post("/dead-letters/{id}/replay", reasoned(a, a.idParam, reasonOptional, http.StatusAccepted,
				func(ctx context.Context, id int64, actor, reason string) (replayedView, error) {
					res, err := a.Replay.Replay(ctx, id, actor, reason)
					if err != nil {
						return replayedView{}, err
					}
					return newReplayedView(res), nil
				}))
			r.Post("/dead-letters/{id}/discard", reasoned(a, a.idParam, reasonOptional, http.StatusOK,
				func(ctx context.Context, id int64, actor, reason string) (discardedView, error) {
					d, err := a.Replay.Discard(ctx, id, actor, reason)
					if err != nil {
						return discardedView{}, err
					}
					return discardedView{DeadLetter: newSummaryView(d)}, nil
				}))
			r.Post("/replay-jobs/{id}/cancel", a.cancelJob)
			r.Post("/reconciliation", a.reconcile)
			r.Post("/psp-reconciliation", a.requestPSPRun)
		})
	})
}

// meView is who the request's token is: the page shows write actions only
// to operators.
type meView struct {
	Name string `json:"name"`
	Role string `json:"role"`
}

func (a *api) me(w http.ResponseWriter, r *http.Request) {
	tok, _ := tokenFrom(r.Context()) // requireRole has checked it is there
	httpserver.WriteJSON(w, http.StatusOK, meView{Name: tok.Name, Role: tok.Role})
}

func (a *api) groups(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("status") {
		q.Set("status", store.StatusOpen) // what is waiting for someone
	}
	m, err := matchFromQuery(q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	groups, err := a.Store.Groups(r.Context(), m)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := groupListView{Items: make([]groupView, 0, len(groups))}
	for _, g := range groups {
		out.Items = append(out.Items, newGroupView(g))
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	f, err := filterFromQuery(r.URL.Query())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	items, next, err := a.Store.List(r.Context(), f)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := listView{Items: make([]summaryView, 0, len(items)), NextCursor: next}
	for _, it := range items {
		out.Items = append(out.Items, newSummaryView(it))
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
}

func (a *api) get(w http.ResponseWriter, r *http.Request) {
	id, ok := a.idParam(w, r)
	if !ok {
		return
	}
	d, err := a.Store.Get(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	v := newDetailView(d, readerLevel(r))
	if d.Status == store.StatusOpen {
		p, err := a.Replay.Predict(r.Context(), d)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		if p.Outcome != "" {
			v.ReplayWould = &replayWouldView{Outcome: p.Outcome, SubjectState: nonEmpty(p.SubjectState)}
		}
	}
	httpserver.WriteJSON(w, http.StatusOK, v)
}

func (a *api) stats(w http.ResponseWriter, r *http.Request) {
	st, err := a.Store.Stats(r.Context(), a.Now())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, newStatsView(st))
}

// filterFromQuery reads the list filters and the page. An empty value is
// no filter, so `?topic=&status=open` filters on status alone.
func filterFromQuery(q url.Values) (store.Filter, error) {
	m, err := matchFromQuery(q)
	f := store.Filter{Match: m, Cursor: q.Get("cursor")}
	if err != nil {
		return f, err
	}
	if f.Limit, err = limitParam(q, 0, input.MaxLimit); err != nil {
		return f, err
	}
	// The store re-validates; checking here answers before touching Postgres.
	return f, f.Validate()
}

// matchFromQuery reads the filters shared by the list and the groups.
func matchFromQuery(q url.Values) (store.Match, error) {
	m := store.Match{
		Topic:         q.Get("topic"),
		Status:        q.Get("status"),
		ErrorClass:    q.Get("error_class"),
		PayoutID:      q.Get("payout_id"),
		User:          q.Get("user"),
		CorrelationID: q.Get("correlation_id"),
		EventType:     q.Get("event_type"),
	}
	var err error
	if m.Since, err = timeParam(q, "since"); err != nil {
		return m, err
	}
	if m.Until, err = timeParam(q, "until"); err != nil {
		return m, err
	}
	return m, m.Validate()
}

func timeParam(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, &input.Invalid{Param: name, Reason: "must be an RFC 3339 time such as 2026-11-20T10:00:00Z"}
	}
	return t, nil
}

// idParam reads the {id} path parameter, answering 400 when it is not a
// positive integer.
func (a *api) idParam(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id < 1 {
		a.fail(w, r, &input.Invalid{Param: "id", Reason: "must be a positive integer"})
		return 0, false
	}
	return id, true
}

// limitParam is the query's limit: absent when there is none (0 leaves
// the default to the area), else an integer from 1 to most.
func limitParam(q url.Values, absent, most int) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return absent, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, &input.Invalid{Param: "limit", Reason: "must be an integer between 1 and " + strconv.Itoa(most)}
	}
	return n, nil
}
