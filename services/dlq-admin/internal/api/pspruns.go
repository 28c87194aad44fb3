package api

import (
	"net/http"
	"strconv"

	"github.com/aegis-payments/aegis/pkg/httpserver"
)

// The PSP reconciliation's routes: dlq-admin requests a run and reads it;
// webhook-api works it (see internal/integrity/pspruns).

func (a *api) requestPSPRun(w http.ResponseWriter, r *http.Request) {
	run, err := a.PSPRuns.Request(r.Context(), actor(r))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/psp-reconciliation/"+strconv.FormatInt(run.ID, 10))
	httpserver.WriteJSON(w, http.StatusAccepted, run)
}

func (a *api) latestPSPRun(w http.ResponseWriter, r *http.Request) {
	run, err := a.PSPRuns.Latest(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, run)
}

func (a *api) getPSPRun(w http.ResponseWriter, r *http.Request) {
	id, ok := a.idParam(w, r)
	if !ok {
		return
	}
	run, err := a.PSPRuns.Get(r.Context(), id)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	httpserver.WriteJSON(w, http.StatusOK, run)
}
