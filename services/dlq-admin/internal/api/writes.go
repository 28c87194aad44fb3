package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/recon"
)

// maxBody bounds a request body; every body here is a few fields.
const maxBody = 64 << 10

// reasonBody is the body of replay (optional) and discard (required).
type reasonBody struct {
	Reason string `json:"reason"`
}

// bulkBody is the body of POST /v1/dead-letters/replay: the list filters,
// dry_run and max.
type bulkBody struct {
	Topic         string `json:"topic"`
	Status        string `json:"status"`
	ErrorClass    string `json:"error_class"`
	Since         string `json:"since"`
	Until         string `json:"until"`
	PayoutID      string `json:"payout_id"`
	User          string `json:"user"`
	CorrelationID string `json:"correlation_id"`
	EventType     string `json:"event_type"`
	// IDs narrows the selection to these letters (rows picked on the page).
	IDs    []int64 `json:"ids"`
	DryRun bool    `json:"dry_run"`
	Max    int     `json:"max"`
	Reason string  `json:"reason"`
}

// bulkDiscardBody is the body of POST /v1/dead-letters/discard: the list
// filters or explicit ids (or both: the ids that match), dry_run, max and
// the reason.
type bulkDiscardBody struct {
	bulkBody
}

// actor is the name of the request's token: who did it, for audit_log.
func actor(r *http.Request) string {
	tok, _ := tokenFrom(r.Context())
	return tok.Name
}

// Whether a write's body must carry a reason (decodeBody's optional).
const (
	reasonOptional = true
	reasonRequired = false
)

// reasoned is a write on the {id} path parameter (read by param, which
// answers a malformed one) whose body is {"reason"}: it decodes the body,
// does the write as the request's token and answers status with what it
// returned, or the error's status.
func reasoned[K, T any](a *api, param func(http.ResponseWriter, *http.Request) (K, bool), optional bool, status int,
	do func(ctx context.Context, id K, actor, reason string) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := param(w, r)
		if !ok {
			return
		}
		var body reasonBody
		if err := decodeBody(w, r, &body, optional); err != nil {
			a.fail(w, r, err)
			return
		}
		res, err := do(r.Context(), id, actor(r), body.Reason)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		httpserver.WriteJSON(w, status, res)
	}
}

func (a *api) bulkReplay(w http.ResponseWriter, r *http.Request) {
	var body bulkBody
	if err := decodeBody(w, r, &body, false); err != nil {
		a.fail(w, r, err)
		return
	}
	req := replay.BulkRequest{Topic: body.Topic, Status: body.Status, ErrorClass: body.ErrorClass, Max: body.Max, Reason: body.Reason,
		PayoutID: body.PayoutID, User: body.User, CorrelationID: body.CorrelationID, EventType: body.EventType, IDs: body.IDs}
	var err error
	if req.Since, err = bodyTime("since", body.Since); err != nil {
		a.fail(w, r, err)
		return
	}
	if req.Until, err = bodyTime("until", body.Until); err != nil {
		a.fail(w, r, err)
		return
	}
	if body.DryRun {
		p, err := a.Replay.Preview(r.Context(), req)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		httpserver.WriteJSON(w, http.StatusOK, newPreviewView(p))
		return
	}
	// Four-eyes: a large replay waits for a second operator.
	ap, held, err := a.Replay.HoldBulk(r.Context(), actor(r), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if held {
		w.Header().Set("Location", "/v1/approvals/"+strconv.FormatInt(ap.ID, 10))
		httpserver.WriteJSON(w, http.StatusAccepted, heldView{Approval: newApprovalView(ap)})
		return
	}
	job, err := a.Replay.CreateJob(r.Context(), actor(r), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/replay-jobs/"+strconv.FormatInt(job.ID, 10))
	httpserver.WriteJSON(w, http.StatusAccepted, newJobView(job))
}

func (a *api) bulkDiscard(w http.ResponseWriter, r *http.Request) {
	var body bulkDiscardBody
	if err := decodeBody(w, r, &body, false); err != nil {
		a.fail(w, r, err)
		return
	}
	req := replay.BulkDiscardRequest{IDs: body.IDs, Max: body.Max, Reason: body.Reason, DryRun: body.DryRun,
		Match: store.Match{Topic: body.Topic, Status: body.Status, ErrorClass: body.ErrorClass, PayoutID: body.PayoutID,
			User: body.User, CorrelationID: body.CorrelationID, EventType: body.EventType}}
	var err error
	if req.Match.Since, err = bodyTime("since", body.Since); err != nil {
		a.fail(w, r, err)
		return
	}
	if req.Match.Until, err = bodyTime("until", body.Until); err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.Replay.BulkDiscard(r.Context(), actor(r), req)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, bulkDiscardedView{DryRun: res.DryRun, Matched: res.Matched, Discarded: res.Discarded, IDs: res.IDs})
}

func (a *api) getJob(w http.ResponseWriter, r *http.Request) {
	id, ok := a.idParam(w, r)
	if !ok {
		return
	}
	job, err := a.Replay.Job(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, newJobView(job))
}

func (a *api) jobLetters(w http.ResponseWriter, r *http.Request) {
	id, ok := a.idParam(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	after := int64(0)
	limit, err := limitParam(q, 100, replay.MaxJobLetters)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			a.fail(w, r, &input.Invalid{Param: "after", Reason: "must be a dead letter id"})
			return
		}
		after = n
	}
	letters, err := a.Replay.JobLetters(r.Context(), id, after, limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := jobLettersView{Items: make([]jobLetterView, 0, len(letters))}
	for _, l := range letters {
		out.Items = append(out.Items, jobLetterView{DeadLetterID: l.DeadLetterID, Outcome: l.Outcome,
			OutboxID: nonZeroID(l.OutboxID), SubjectState: nonEmpty(l.SubjectState), Error: nonEmpty(l.Error), At: l.At.UTC()})
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
}

func (a *api) listJobs(w http.ResponseWriter, r *http.Request) {
	limit, err := limitParam(r.URL.Query(), 20, replay.MaxJobList)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	jobs, err := a.Replay.Jobs(r.Context(), limit)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := jobListView{Items: make([]jobView, 0, len(jobs))}
	for _, j := range jobs {
		out.Items = append(out.Items, newJobView(j))
	}
	httpserver.WriteJSON(w, http.StatusOK, out)
}

func (a *api) cancelJob(w http.ResponseWriter, r *http.Request) {
	id, ok := a.idParam(w, r)
	if !ok {
		return
	}
	job, err := a.Replay.CancelJob(r.Context(), id, actor(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, newJobView(job))
}

func (a *api) latestReconciliation(w http.ResponseWriter, r *http.Request) {
	run, err := a.Recon.Latest(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, newRunView(run))
}

func (a *api) reconcile(w http.ResponseWriter, r *http.Request) {
	run, err := a.Recon.Run(r.Context(), recon.TriggerManual, actor(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, newRunView(run))
}

// bodyError is a request body the API cannot read.
type bodyError struct{ reason string }

func (e *bodyError) Error() string { return "request body: " + e.reason }

// decodeBody reads one JSON object into v, refusing unknown fields (a typo
// in "dry_run" must not replay for real). An empty body is allowed when
// optional, leaving v as it is.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &bodyError{reason: fmt.Sprintf("larger than %d bytes", maxBody)}
		}
		return &bodyError{reason: "could not be read"}
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		if optional {
			return nil
		}
		return &bodyError{reason: "a JSON object is required"}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			return &bodyError{reason: fmt.Sprintf("field %q must be a %s", typeErr.Field, typeErr.Type)}
		}
		return &bodyError{reason: "not a JSON object of the expected fields: " + err.Error()}
	}
	if dec.More() {
		return &bodyError{reason: "trailing data after the JSON object"}
	}
	return nil
}

func bodyTime(name, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, &input.Invalid{Param: name, Reason: "must be an RFC 3339 time such as 2026-11-20T10:00:00Z"}
	}
	return t, nil
}
