package psp

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// maxBodyBytes bounds request bodies.
const maxBodyBytes = 1 << 20

// Server is the PSP stand-in. Create it with New, serve Handler, and run
// Run for auto-settlement and webhook delivery.
type Server struct {
	cfg    Config
	log    *slog.Logger
	client *http.Client
	ownTr  *http.Transport // non-nil when client is private
	mux    *http.ServeMux

	wake      chan struct{} // nudges Run's scheduler
	closing   chan struct{} // closed when Run's context ends
	closeOnce sync.Once

	mu      sync.Mutex
	rng     *rand.Rand
	st      *state
	faults  map[Provider]*faultState
	running bool
}

// New builds a Server from cfg. A nil logger discards logs.
func New(cfg Config, logger *slog.Logger) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:     cfg,
		log:     logger,
		wake:    make(chan struct{}, 1),
		closing: make(chan struct{}),
		rng:     newRand(cfg.Seed),
		faults:  make(map[Provider]*faultState),
	}
	if cfg.HTTPClient != nil {
		s.client = cfg.HTTPClient
	} else {
		s.ownTr = http.DefaultTransport.(*http.Transport).Clone()
		s.client = &http.Client{Transport: s.ownTr}
	}
	for _, p := range providers {
		s.faults[p] = newFaultState(FaultSpec{}, p)
	}
	s.st = s.freshState()
	s.setFaultsLocked(cfg.Faults)
	s.mux = s.routes()
	return s, nil
}

// freshState is an empty state with the starting balances.
func (s *Server) freshState() *state {
	st := newState()
	seedBalances(st, s.cfg)
	return st
}

func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// Handler returns the HTTP handler serving the PSP routes, the /_psp/
// admin API and GET /healthz.
func (s *Server) Handler() http.Handler { return s.mux }

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})

	// Stripe.
	mux.HandleFunc("POST /v1/payouts", s.handleStripePayoutCreate)
	mux.HandleFunc("GET /v1/payouts", s.handleStripeList(KindPayout))
	mux.HandleFunc("GET /v1/payouts/{id}", s.handleStripeGet(KindPayout))
	mux.HandleFunc("GET /v1/transfers", s.handleStripeList(KindTransfer))
	mux.HandleFunc("POST /v1/transfers", s.handleStripeTransferCreate)
	mux.HandleFunc("GET /v1/transfers/{id}", s.handleStripeGet(KindTransfer))
	mux.HandleFunc("POST /v1/transfers/{id}", s.handleStripeTransferUpdate)
	mux.HandleFunc("POST /v1/transfers/{id}/reversals", s.handleStripeReversalCreate)
	mux.HandleFunc("GET /v1/transfers/{id}/reversals", s.handleStripeReversalList)
	mux.HandleFunc("GET /v1/transfers/{id}/reversals/{reversal}", s.handleStripeReversalGet)
	mux.HandleFunc("GET /v1/accounts/{id}", s.handleStripeAccount)
	mux.HandleFunc("GET /v1/accounts/{id}/external_accounts/{ext}", s.handleStripeExternalAccount)
	mux.HandleFunc("GET /v1/balance", s.handleStripeBalance)
	mux.HandleFunc("GET /v1/balance_transactions", s.handleStripeBalanceTxns)
	mux.HandleFunc("GET /v1/balance_transactions/{id}", s.handleStripeBalanceTxn)
	mux.HandleFunc("GET /v1/charges/{id}", s.handleStripeCharge)
	mux.HandleFunc("GET /v1/events", s.handleStripeEvents)
	mux.HandleFunc("GET /v1/events/{id}", s.handleStripeEvent)
	mux.HandleFunc("/v1/", s.handleStripeUnknown)

	// Paystack.
	mux.HandleFunc("POST /transfer", s.handlePaystackTransferCreate)
	mux.HandleFunc("POST /transfer/finalize_transfer", s.handlePaystackFinalize)
	mux.HandleFunc("GET /transfer/verify/{reference}", s.handlePaystackVerify)
	mux.HandleFunc("GET /transfer/{code}", s.handlePaystackFetch)
	mux.HandleFunc("GET /transfer", s.handlePaystackTransferList)
	mux.HandleFunc("GET /transaction", s.handlePaystackTransactionList)
	mux.HandleFunc("GET /transaction/verify/{reference}", s.handlePaystackTransactionVerify)
	mux.HandleFunc("GET /refund", s.handlePaystackRefundList)
	mux.HandleFunc("GET /dispute", s.handlePaystackDisputeList)
	mux.HandleFunc("GET /transferrecipient/{code}", s.handlePaystackRecipient)
	mux.HandleFunc("GET /balance", s.handlePaystackBalance)

	// Admin.
	mux.HandleFunc("GET /_psp/faults", s.handleFaultsGet)
	mux.HandleFunc("PUT /_psp/faults", s.handleFaultsPut)
	mux.HandleFunc("DELETE /_psp/faults", s.handleFaultsDelete)
	mux.HandleFunc("GET /_psp/objects", s.handleObjects)
	mux.HandleFunc("GET /_psp/objects/{id}", s.handleObject)
	mux.HandleFunc("POST /_psp/objects/{id}/settle", s.handleSettle)
	mux.HandleFunc("POST /_psp/objects/{id}/reverse", s.handleReverse)
	mux.HandleFunc("POST /_psp/payments", s.handlePaymentCreate)
	mux.HandleFunc("GET /_psp/payments/{id}", s.handlePaymentGet)
	mux.HandleFunc("POST /_psp/payments/{id}/refunds", s.handleRefundCreate)
	mux.HandleFunc("POST /_psp/payments/{id}/disputes", s.handleDisputeCreate)
	mux.HandleFunc("POST /_psp/disputes/{id}/close", s.handleDisputeClose)
	mux.HandleFunc("GET /_psp/calls", s.handleCalls)
	mux.HandleFunc("GET /_psp/webhooks", s.handleWebhooks)
	mux.HandleFunc("DELETE /_psp/state", s.handleStateDelete)
	return mux
}

// ---------------------------------------------------------------------------
// Call bookkeeping and responses.

// beginCall records a request to a PSP route in arrival order and returns
// the state it runs against.
func (s *Server) beginCall(r *http.Request, p Provider) (*state, *CallRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.callSeq++
	c := &CallRecord{
		Seq:            st.callSeq,
		Time:           time.Now().UTC(),
		Provider:       p,
		Method:         r.Method,
		Path:           r.URL.Path,
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
		RequestID:      newID("req_", 14),
	}
	st.calls = append(st.calls, c)
	if over := len(st.calls) - s.cfg.MaxCalls; over > 0 {
		clear(st.calls[:over])
		st.calls = st.calls[over:]
		st.callsDropped += int64(over)
	}
	return st, c
}

// markCall updates a call's outcome (used before a hang so the call log
// shows what is going on while the request is still open).
func (s *Server) markCall(c *CallRecord, outcome string, status int, objectID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.Outcome = outcome
	c.Status = status
	if objectID != "" {
		c.ObjectID = objectID
	}
}

func (s *Server) setCallPayoutID(c *CallRecord, payoutID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.PayoutID = payoutID
}

// respond writes res and completes the call record.
func (s *Server) respond(w http.ResponseWriter, c *CallRecord, res response) {
	s.markCall(c, res.outcome, res.status, res.objectID)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Request-Id", c.RequestID)
	for k, v := range res.header {
		h.Set(k, v)
	}
	w.WriteHeader(res.status)
	_, _ = w.Write(res.body)

	s.mu.Lock()
	rec := *c
	s.mu.Unlock()
	level := slog.LevelInfo
	if res.status >= 500 || res.status == http.StatusTooManyRequests {
		level = slog.LevelWarn
	}
	s.log.LogAttrs(context.Background(), level, "psp call",
		slog.String("provider", string(rec.Provider)),
		slog.String("method", rec.Method),
		slog.String("path", rec.Path),
		slog.String("idempotency_key", rec.IdempotencyKey),
		slog.String("outcome", rec.Outcome),
		slog.Int("status", rec.Status),
		slog.String("payout_id", rec.PayoutID),
		slog.String("object_id", rec.ObjectID),
		slog.String("request_id", rec.RequestID),
		slog.Float64("duration_ms", float64(time.Since(rec.Time).Microseconds())/1000),
	)
}

// hang blocks for d, until the client goes away, or until the server
// shuts down.
func (s *Server) hang(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-s.closing:
	}
}

// sleep is hang for latency; it reports false if the server is closing.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return true
	case <-s.closing:
		return false
	}
}

func (s *Server) latency(p Provider) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.faults[p].spec.Latency)
}

// ---------------------------------------------------------------------------
// The create pipeline shared by Stripe and Paystack.

// dialect renders the provider-specific error bodies the pipeline needs.
type dialect interface {
	serverError(status int) []byte
	rateLimited() []byte
	timedOut() []byte
	idempotencyMismatch(key string) []byte
	idempotencyInUse(key string) []byte
}

// createOp is one money-moving request ready for the pipeline.
type createOp struct {
	provider    Provider
	d           dialect
	st          *state
	call        *CallRecord
	idemKey     string // Idempotency-Key header, "" if none
	idemScope   string // provider + API key (+ account) + key
	fingerprint string // method, path and canonical parameters
	// faultless: the request moves no money, so no fault is drawn for it
	// (latency still applies).
	faultless bool
	// exec validates and executes the request. It runs with s.mu held;
	// draw decides the execution fault and must be called at most once,
	// only when the request is about to execute (after validation, and not
	// for a replay).
	exec func(st *state, draw func() FaultKind) response
}

// runCreate is the heart of the stand-in:
//
//  1. infrastructure faults (5xx, 429, timeout) — nothing stored;
//  2. idempotency: replay, mismatch (400), in use (409), or claim the key;
//  3. latency, and the delay of slow_create (the key stays claimed meanwhile);
//  4. execute (validation, execution faults, business rules, create) and
//     store the result under the key;
//  5. respond, or hang first for timeout_after_create.
func (s *Server) runCreate(w http.ResponseWriter, r *http.Request, op createOp) {
	s.mu.Lock()
	fs := s.faults[op.provider]
	var infra FaultKind
	if !op.faultless {
		infra = fs.drawInfra(s.rng)
	}
	spec := fs.spec
	s.mu.Unlock()
	timeout := time.Duration(spec.Timeout)

	switch infra {
	case Fault5xx:
		res := response{status: spec.ErrorStatus, body: op.d.serverError(spec.ErrorStatus), outcome: OutcomeFault5xx}
		if op.provider == ProviderStripe && op.idemKey != "" {
			// Stripe saves the answer of a request that began executing,
			// 500s included, and replays it for every retry with the key.
			s.mu.Lock()
			if s.liveIdemLocked(op.st, op.idemScope) == nil {
				op.st.putIdem(op.idemScope, &idemEntry{fingerprint: op.fingerprint, requestID: op.call.RequestID,
					done: true, res: res, at: time.Now()})
			}
			s.mu.Unlock()
		}
		s.respond(w, op.call, res)
		return
	case Fault429:
		s.respond(w, op.call, response{
			status:  http.StatusTooManyRequests,
			body:    op.d.rateLimited(),
			header:  map[string]string{"Retry-After": strconv.Itoa(spec.RetryAfterSeconds)},
			outcome: OutcomeFault429,
		})
		return
	case FaultTimeout:
		s.markCall(op.call, OutcomeFaultTimeout, http.StatusGatewayTimeout, "")
		s.hang(r.Context(), timeout)
		s.respond(w, op.call, response{status: http.StatusGatewayTimeout, body: op.d.timedOut(), outcome: OutcomeFaultTimeout})
		return
	}
	// slow_create: the request reaches execution only after the fault
	// timeout (with its key claimed meanwhile), as a PSP under strain
	// does; the caller may have given up long before.
	delay := time.Duration(spec.Latency)
	slow := infra == FaultSlowCreate
	if slow {
		delay += timeout
	}

	var entry *idemEntry
	if op.idemKey != "" {
		s.mu.Lock()
		if e := s.liveIdemLocked(op.st, op.idemScope); e != nil {
			var res response
			switch {
			case e.fingerprint != op.fingerprint:
				res = response{status: http.StatusBadRequest, body: op.d.idempotencyMismatch(op.idemKey), outcome: OutcomeConflict}
			case !e.done:
				res = response{status: http.StatusConflict, body: op.d.idempotencyInUse(op.idemKey), outcome: OutcomeConflict}
			default:
				res = e.res
				res.header = map[string]string{
					"Idempotent-Replayed": "true",
					"Original-Request":    e.requestID,
				}
				for k, v := range e.res.header {
					res.header[k] = v
				}
				res.outcome = OutcomeReplayed
			}
			s.mu.Unlock()
			s.respond(w, op.call, res)
			return
		}
		entry = &idemEntry{fingerprint: op.fingerprint, requestID: op.call.RequestID, at: time.Now()}
		op.st.putIdem(op.idemScope, entry)
		op.call.Outcome = OutcomeExecuting
		s.mu.Unlock()
	}

	// Latency runs while the key is held. A client that gives up does not
	// stop execution (as with the real PSPs); only shutdown does.
	if !s.sleep(context.Background(), delay) {
		s.mu.Lock()
		if entry != nil && op.st.idem[op.idemScope] == entry {
			delete(op.st.idem, op.idemScope)
		}
		s.mu.Unlock()
		s.respond(w, op.call, response{status: http.StatusServiceUnavailable, body: op.d.serverError(http.StatusServiceUnavailable), outcome: OutcomeFault5xx})
		return
	}

	var execFault FaultKind
	s.mu.Lock()
	res := op.exec(op.st, func() FaultKind {
		if slow || op.faultless {
			return "" // one fault per request: it has had its own
		}
		execFault = s.faults[op.provider].drawExec(s.rng)
		return execFault
	})
	if execFault == FaultErrorAfterCreate && res.outcome == OutcomeCreated {
		// The object exists; the caller is told the server failed. The
		// answer is saved under the key like any Stripe 5xx.
		res = response{status: spec.ErrorStatus, body: op.d.serverError(spec.ErrorStatus),
			outcome: OutcomeFaultErrorCreate, objectID: res.objectID}
	}
	if entry != nil {
		entry.res = res
		entry.done = true
	}
	s.mu.Unlock()

	if execFault == FaultTimeoutAfterCreate || res.lose {
		s.markCall(op.call, OutcomeFaultTimeoutCreate, http.StatusGatewayTimeout, res.objectID)
		s.hang(r.Context(), timeout)
		s.respond(w, op.call, response{status: http.StatusGatewayTimeout, body: op.d.timedOut(), outcome: OutcomeFaultTimeoutCreate, objectID: res.objectID})
		return
	}
	s.respond(w, op.call, res)
}

// liveIdemLocked returns the key's entry, pruning it (and any other
// expired finished entry, a few at a time) once it is older than the
// idempotency window, as Stripe forgets keys after 24 hours.
func (s *Server) liveIdemLocked(st *state, scope string) *idemEntry {
	now := time.Now()
	expired := func(e *idemEntry) bool { return e.done && now.Sub(e.at) >= s.cfg.IdempotencyWindow }
	// Keys are pruned in the order they were first used.
	for len(st.idemOrder) > 0 && expired(st.idemOrder[0].e) {
		head := st.idemOrder[0]
		if st.idem[head.scope] == head.e {
			delete(st.idem, head.scope)
		}
		st.idemOrder[0] = idemRef{}
		st.idemOrder = st.idemOrder[1:]
	}
	e := st.idem[scope]
	if e != nil && expired(e) {
		delete(st.idem, scope)
		return nil
	}
	return e
}

// ---------------------------------------------------------------------------
// Admin API.

type adminError struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"error":"encoding response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
	_, _ = w.Write([]byte("\n"))
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{}`)
	}
	return b
}

// FaultsView is the body of GET /_psp/faults.
type FaultsView struct {
	Stripe   FaultSpec `json:"stripe"`
	Paystack FaultSpec `json:"paystack"`
}

func (s *Server) faultsViewLocked() FaultsView {
	return FaultsView{
		Stripe:   s.faults[ProviderStripe].view(),
		Paystack: s.faults[ProviderPaystack].view(),
	}
}

// setFaultsLocked replaces the fault config of the spec's providers; each
// provider gets its own copy of the Next queue.
func (s *Server) setFaultsLocked(spec FaultSpec) {
	for _, p := range spec.targets() {
		s.faults[p] = newFaultState(spec, p)
	}
}

// SetFaults replaces the fault configuration like PUT /_psp/faults.
func (s *Server) SetFaults(spec FaultSpec) error {
	if _, err := spec.normalize(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setFaultsLocked(spec)
	return nil
}

func (s *Server) handleFaultsGet(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	v := s.faultsViewLocked()
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) handleFaultsPut(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, adminError{Error: err.Error()})
		return
	}
	spec, err := ParseFaultSpec(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, adminError{Error: err.Error()})
		return
	}
	s.mu.Lock()
	s.setFaultsLocked(spec)
	v := s.faultsViewLocked()
	s.mu.Unlock()
	s.log.Info("faults replaced", slog.String("provider", spec.Provider), slog.String("spec", string(body)))
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) handleFaultsDelete(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	s.setFaultsLocked(FaultSpec{})
	v := s.faultsViewLocked()
	s.mu.Unlock()
	s.log.Info("faults cleared")
	writeJSON(w, http.StatusOK, v)
}

// ObjectsView is the body of GET /_psp/objects.
type ObjectsView struct {
	Items []ObjectRecord `json:"items"`
}

func (s *Server) handleObjects(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	provider, kind, payoutID := q.Get("provider"), q.Get("kind"), q.Get("payout_id")
	s.mu.Lock()
	items := make([]ObjectRecord, 0, len(s.st.objects))
	for _, o := range s.st.objects {
		rec := o.record()
		if (provider != "" && string(rec.Provider) != provider) ||
			(kind != "" && rec.Kind != kind) ||
			(payoutID != "" && rec.PayoutID != payoutID) {
			continue
		}
		items = append(items, rec)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, ObjectsView{Items: items})
}

func (s *Server) handleObject(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	o := s.st.byID[r.PathValue("id")]
	var rec ObjectRecord
	if o != nil {
		rec = o.record()
	}
	s.mu.Unlock()
	if o == nil {
		writeJSON(w, http.StatusNotFound, adminError{Error: "object not found"})
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// SettleRequest is the body of POST /_psp/objects/{id}/settle.
type SettleRequest struct {
	Outcome     string `json:"outcome"` // paid|success|failed; "" = as auto-settle would
	FailureCode string `json:"failure_code"`
}

func (s *Server) handleSettle(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, adminError{Error: err.Error()})
		return
	}
	var req SettleRequest
	if len(body) > 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			writeJSON(w, http.StatusBadRequest, adminError{Error: "invalid JSON: " + err.Error()})
			return
		}
	}
	var failed *bool
	switch req.Outcome {
	case "":
	case "paid", "success", "succeeded":
		failed = new(bool)
	case "failed":
		failed = new(bool)
		*failed = true
	default:
		writeJSON(w, http.StatusBadRequest, adminError{Error: `outcome: want "paid" or "failed"`})
		return
	}

	s.mu.Lock()
	st := s.st
	o := st.byID[r.PathValue("id")]
	if o == nil {
		s.mu.Unlock()
		writeJSON(w, http.StatusNotFound, adminError{Error: "object not found"})
		return
	}
	if o.settled() {
		rec := o.record()
		s.mu.Unlock()
		writeJSON(w, http.StatusConflict, struct {
			Error  string       `json:"error"`
			Object ObjectRecord `json:"object"`
		}{"already settled", rec})
		return
	}
	fail, code := autoOutcome(o)
	if failed != nil {
		fail = *failed
		code = req.FailureCode
	}
	s.settleLocked(st, o, fail, code, time.Now())
	rec := o.record()
	s.mu.Unlock()
	s.nudge()
	writeJSON(w, http.StatusOK, rec)
}

// CallsView is the body of GET /_psp/calls.
type CallsView struct {
	Items   []CallRecord `json:"items"`
	Dropped int64        `json:"dropped"`
}

func (s *Server) handleCalls(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	items := make([]CallRecord, 0, len(s.st.calls))
	for _, c := range s.st.calls {
		items = append(items, *c)
	}
	v := CallsView{Items: items, Dropped: s.st.callsDropped}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, v)
}

// WebhooksView is the body of GET /_psp/webhooks.
type WebhooksView struct {
	Items []WebhookRecord `json:"items"`
}

func (s *Server) handleWebhooks(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	items := make([]WebhookRecord, 0, len(s.st.deliveries))
	for _, d := range s.st.deliveries {
		rec := d.rec
		if d.rec.LastAttemptAt != nil {
			t := *d.rec.LastAttemptAt
			rec.LastAttemptAt = &t
		}
		items = append(items, rec)
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, WebhooksView{Items: items})
}

// Reset wipes objects, calls, idempotency keys, webhook records, pending
// settlements/deliveries and faults, and re-seeds the random source, like
// DELETE /_psp/state.
func (s *Server) Reset() {
	s.mu.Lock()
	s.st = s.freshState()
	s.rng = newRand(s.cfg.Seed)
	s.setFaultsLocked(FaultSpec{})
	s.mu.Unlock()
	s.nudge()
}

func (s *Server) handleStateDelete(w http.ResponseWriter, _ *http.Request) {
	s.Reset()
	s.log.Info("state wiped")
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	return io.ReadAll(r.Body)
}
