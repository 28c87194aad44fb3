package psp

import (
	"container/heap"
	crand "crypto/rand"
	"strings"
	"time"
)

// Call outcomes recorded in GET /_psp/calls.
const (
	OutcomeExecuting          = "executing" // transient: the idempotency key is held
	OutcomeCreated            = "created"
	OutcomeReplayed           = "replayed"
	OutcomeRejected           = "rejected" // business rejection (invalid account, insufficient funds)
	OutcomeInvalid            = "invalid"  // validation error (400) or unknown route
	OutcomeConflict           = "conflict" // idempotency mismatch/in use, duplicate Paystack reference
	OutcomeUnauthorized       = "unauthorized"
	OutcomeOK                 = "ok"        // successful read
	OutcomeNotFound           = "not_found" // read of an unknown object
	OutcomeFault5xx           = "fault:5xx"
	OutcomeFault429           = "fault:429"
	OutcomeFaultTimeout       = "fault:timeout"
	OutcomeFaultTimeoutCreate = "fault:timeout_after_create"
	OutcomeFaultErrorCreate   = "fault:error_after_create"
)

// Object kinds.
const (
	KindPayout   = "payout"
	KindTransfer = "transfer"
)

// ObjectRecord is one created object as listed by GET /_psp/objects.
type ObjectRecord struct {
	Provider       Provider `json:"provider"`
	Kind           string   `json:"kind"`
	ID             string   `json:"id"`
	IdempotencyKey string   `json:"idempotency_key"`
	Reference      string   `json:"reference"`
	PayoutID       string   `json:"payout_id"`
	Amount         int64    `json:"amount"`
	Currency       string   `json:"currency"`
	Destination    string   `json:"destination"`
	Status         string   `json:"status"`
	FailureCode    string   `json:"failure_code,omitempty"`
	// Account is the Stripe connected account the object belongs to (a
	// payout made with Stripe-Account, or a transfer made from its
	// balance); "" for the platform's.
	Account string `json:"account,omitempty"`
	// AmountReversed is how much of a Stripe transfer has been reversed.
	AmountReversed int64      `json:"amount_reversed,omitempty"`
	CreatedAt      time.Time  `json:"created_at"`
	SettledAt      *time.Time `json:"settled_at,omitempty"`
}

// CallRecord is one request to a PSP route as listed by GET /_psp/calls.
type CallRecord struct {
	Seq            int64     `json:"seq"`
	Time           time.Time `json:"time"`
	Provider       Provider  `json:"provider"`
	Method         string    `json:"method"`
	Path           string    `json:"path"`
	IdempotencyKey string    `json:"idempotency_key"`
	Outcome        string    `json:"outcome"`
	Status         int       `json:"status"`
	PayoutID       string    `json:"payout_id"`
	ObjectID       string    `json:"object_id"`
	RequestID      string    `json:"request_id"`
}

// WebhookRecord is one event delivery as listed by GET /_psp/webhooks.
type WebhookRecord struct {
	EventID       string     `json:"event_id"`
	Type          string     `json:"type"`
	Provider      Provider   `json:"provider"`
	ObjectID      string     `json:"object_id"`
	URL           string     `json:"url"`
	Attempts      int        `json:"attempts"`
	LastStatus    int        `json:"last_status"`
	LastError     string     `json:"last_error,omitempty"`
	State         string     `json:"state"` // pending, delivered, failed, aborted, dropped
	CreatedAt     time.Time  `json:"created_at"`
	LastAttemptAt *time.Time `json:"last_attempt_at,omitempty"`
}

// Delivery states.
const (
	DeliveryPending   = "pending"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
	DeliveryAborted   = "aborted" // server shut down before it was delivered
	DeliveryDropped   = "dropped" // never sent (fault drop_webhook_rate)
)

// object is one created payout/transfer. Guarded by Server.mu.
type object struct {
	rec ObjectRecord

	stripePayout   *stripePayout
	stripeTransfer *stripeTransfer
	paystack       *paystackTransfer

	// paystackFP fingerprints the parameters a Paystack reference was
	// first used with.
	paystackFP string
}

func (o *object) record() ObjectRecord {
	r := o.rec
	if o.rec.SettledAt != nil {
		t := *o.rec.SettledAt
		r.SettledAt = &t
	}
	return r
}

func (o *object) settled() bool { return o.rec.SettledAt != nil }

// response is a complete answer to a PSP request.
type response struct {
	status   int
	body     []byte
	header   map[string]string
	outcome  string
	objectID string
	// lose: the request executed (and its answer is saved under its key)
	// but the caller gets a timeout, as with timeout_after_create.
	lose bool
}

// idemEntry is one idempotency key's slot.
type idemEntry struct {
	fingerprint string
	requestID   string // of the request that executed
	done        bool
	res         response
	at          time.Time // when the key was first used; pruned after the window
}

// delivery is one webhook event on its way out.
type delivery struct {
	rec      WebhookRecord
	body     []byte
	provider Provider
}

// task is a timed job for Run: a settlement or a delivery attempt.
type task struct {
	due      time.Time
	seq      uint64
	settleID string    // object to auto-settle, or
	delivery *delivery // delivery to attempt
}

type taskHeap []*task

func (h taskHeap) Len() int { return len(h) }
func (h taskHeap) Less(i, j int) bool {
	if !h[i].due.Equal(h[j].due) {
		return h[i].due.Before(h[j].due)
	}
	return h[i].seq < h[j].seq
}
func (h taskHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *taskHeap) Push(x any)   { *h = append(*h, x.(*task)) }
func (h *taskHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return t
}

// state is everything DELETE /_psp/state wipes. Requests capture the
// *state they started with, so a wipe never mixes old and new records.
// Guarded by Server.mu.
type state struct {
	objects      []*object
	byID         map[string]*object
	paystackRefs map[string]*object // apiKey \x00 reference
	idem         map[string]*idemEntry
	idemOrder    []idemRef // keys in the order first used, for pruning
	calls        []*CallRecord
	callSeq      int64
	callsDropped int64
	deliveries   []*delivery
	tasks        taskHeap
	taskSeq      uint64
	paystackSeq  int64
	// lostOnce holds the payout ids whose first create to a ba_lost_*
	// destination has lost its answer.
	lostOnce map[string]bool
	// payments are the payments the stand-in was told of (moneyback.go),
	// by id, with their refunds and disputes.
	payments map[string]*payment
	disputes map[string]*payment // dispute id → its payment
	// paymentOrder is payments in creation order (GET /transaction).
	paymentOrder []*payment
	// stripeEvents is every Stripe event created, sent or not, oldest
	// first: GET /v1/events.
	stripeEvents []recordedEvent
	// balances are the available balances (balance.go).
	balances map[balanceKey]int64
	// stripeTxns is every Stripe balance transaction posted, oldest
	// first, and stripeTxnByID the same by id (balancetxn.go).
	stripeTxns    []*stripeBalanceTxn
	stripeTxnByID map[string]*stripeBalanceTxn
	// charges are the Stripe payments by charge id (charges.go).
	charges map[string]*payment
	// accounts are the connected accounts named so far, with their
	// creation time (connect.go).
	accounts map[string]int64
	// recipients are the Paystack transfer recipients fetched so far, by
	// secret key and code (recipients.go).
	recipients map[string]*paystackRecipient
}

func newState() *state {
	return &state{
		byID:          make(map[string]*object),
		paystackRefs:  make(map[string]*object),
		idem:          make(map[string]*idemEntry),
		lostOnce:      make(map[string]bool),
		payments:      make(map[string]*payment),
		disputes:      make(map[string]*payment),
		paystackSeq:   1_000_000,
		balances:      make(map[balanceKey]int64),
		stripeTxnByID: make(map[string]*stripeBalanceTxn),
		charges:       make(map[string]*payment),
		accounts:      make(map[string]int64),
		recipients:    make(map[string]*paystackRecipient),
	}
}

// idemRef names an idempotency entry in idemOrder.
type idemRef struct {
	scope string
	e     *idemEntry
}

func (st *state) putIdem(scope string, e *idemEntry) {
	st.idem[scope] = e
	st.idemOrder = append(st.idemOrder, idemRef{scope: scope, e: e})
}

func (st *state) addObject(o *object) {
	st.objects = append(st.objects, o)
	st.byID[o.rec.ID] = o
}

func (st *state) schedule(t *task) {
	st.taskSeq++
	t.seq = st.taskSeq
	heap.Push(&st.tasks, t)
}

// popDue removes and returns the tasks due at now.
func (st *state) popDue(now time.Time) []*task {
	var due []*task
	for len(st.tasks) > 0 && !st.tasks[0].due.After(now) {
		due = append(due, heap.Pop(&st.tasks).(*task))
	}
	return due
}

// nextWait is the wait until the next task (negative if there is none).
func (st *state) nextWait(now time.Time) time.Duration {
	if len(st.tasks) == 0 {
		return -1
	}
	return max(0, st.tasks[0].due.Sub(now))
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns prefix + n random characters. IDs come from crypto/rand,
// not the seeded source, so a restarted server with a fixed PSP_SEED never
// reissues an id (or an event id) that Aegis has already seen.
func newID(prefix string, n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b) // never fails (Go >= 1.24)
	var sb strings.Builder
	sb.Grow(len(prefix) + n)
	sb.WriteString(prefix)
	for _, c := range b {
		sb.WriteByte(idAlphabet[int(c)%len(idAlphabet)])
	}
	return sb.String()
}

func newLowerID(prefix string, n int) string {
	return prefix + strings.ToLower(newID("", n))
}
