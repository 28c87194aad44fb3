package payout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout/sqlcdb"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/psp"
)

// Outcomes of a request to the PSP (payout_attempts.outcome).
const (
	reqAccepted    = "accepted"
	reqRefused     = "refused"
	reqNotExecuted = "not_executed"
	reqUnknown     = "unknown"
	reqFound       = "found"
	reqNotFound    = "not_found"
)

// attemptResult is what one attempt learned from the PSP: the answer to
// apply (res or err), and every request made, for the attempt history.
type attemptResult struct {
	res psp.Result
	err error
	// created: a create was sent.
	created bool
	// adopted: res is the PSP's existing object, found by a lookup.
	adopted bool
	// newKey is the key generation taken after a lookup confirmed that
	// the PSP has no object for the payout.
	newKey string
	// confirmedAbsent: after a definite failure, a lookup confirmed that
	// the PSP has no object for the payout (so an earlier unknown outcome
	// did not pay).
	confirmedAbsent bool
	// unsettled: a lookup found nothing, but the last request whose outcome
	// is unknown was sent less than the settle window ago; the PSP may
	// still be executing it, so the absence is not confirmed yet.
	unsettled bool
	// transfer is the Stripe transfer this attempt made or found for a
	// payout to a connected account's external account.
	transfer string
	// sentAt is when the create was sent.
	sentAt time.Time
	// createRow is the payout_attempts row of the create, written before
	// it was sent (BeginCreate); 0 when none was (the planted defect).
	createRow int64
	// notSending: the payout left SENDING_TO_GATEWAY (an outcome event)
	// before the create was recorded, so it was not sent.
	notSending bool
	requests   []pspRequest
}

// errNotSending means the payout is no longer SENDING_TO_GATEWAY when a
// create was about to be recorded.
var errNotSending = errors.New("payout no longer SENDING_TO_GATEWAY")

// ClassSettling is the class of a payout deferred because the PSP may
// still be executing a request whose outcome is unknown.
const ClassSettling errclass.Class = "psp_settling"

// settleAt is when a lookup that finds nothing starts to prove that the
// PSP has no object for the payout: the settle window after the last
// request whose outcome is unknown was sent (zero if there was none).
func (pr *Processor) settleAt(p *Payout) time.Time {
	if p.LastUnknownAt == nil {
		return time.Time{}
	}
	return p.LastUnknownAt.Add(pr.cfg.SettleWindow)
}

// settled reports whether the PSP has had time to finish every request for
// the payout whose outcome is unknown.
func (pr *Processor) settled(p *Payout) bool {
	return !pr.now().Before(pr.settleAt(p))
}

// needsLookup says whether the attempt must look the payout up before
// sending: after an unknown outcome or a 5xx (LookupNeeded), on an
// operator's replay of a NEEDS_REVIEW payout, and once the first attempt is
// older than the PSP's idempotency window (the PSP has forgotten the key,
// so re-sending under it could pay twice).
func (pr *Processor) needsLookup(p *Payout, wasReview bool) bool {
	if p.LookupNeeded || wasReview {
		return true
	}
	return p.FirstAttemptAt != nil && pr.now().Sub(*p.FirstAttemptAt) >= pr.cfg.IdempotencyWindow
}

// sendingCreate is a create whose record (key, send time, its "sending"
// payout_attempts row) is written in the transaction that moves its payout
// to SENDING_TO_GATEWAY (createAhead), so it is committed before the call
// with no commit of its own.
type sendingCreate struct {
	key  string
	step string
	at   time.Time
	// row is its payout_attempts row, set once the move is sent.
	row int64
}

// createAhead returns the create of the attempt about to start, to be
// recorded with the move to SENDING_TO_GATEWAY (moveSending), or nil when
// it cannot be: when the attempt looks the payout up first (needsLookup:
// the key it sends under, the same or a new generation, is chosen only
// from the lookup's answer, so attempt commits it after the lookup,
// beginCreate), when no client serves the payout's provider (nothing is
// sent: the attempt fails as refused), and in the planted defect's build.
// Every other attempt sends at once under the key it would take now: a
// first attempt from INITIALIZED, a scheduled retry within the idempotency
// window with no unknown outcome or 5xx before it (no LookupNeeded), and a
// resume of an unanswered create within the window (the same key gets the
// PSP's answer back). An operator's replay of a NEEDS_REVIEW payout always
// looks up first.
//
// Its send time is taken here, inside the transaction, a little before the
// call: a first_attempt_at that early only brings the lookup past the
// idempotency window forward; the settle window (SettleWindow > CallTimeout)
// runs from it as it ran from beginCreate's time, also taken before its
// commit.
func (pr *Processor) createAhead(p *Payout, wasReview bool) *sendingCreate {
	if plantedLateFirstAttempt() || pr.needsLookup(p, wasReview) {
		return nil
	}
	if _, err := pr.psps.Get(p.Provider); err != nil {
		return nil
	}
	return &sendingCreate{key: requestKey(p, createKey(p)), step: p.step(), at: pr.now()}
}

// createKey is the Idempotency-Key the payout's next create is sent under
// unless a lookup first takes a new generation.
func createKey(p *Payout) string {
	if p.PSPKey != "" {
		return p.PSPKey
	}
	return psp.IdempotencyKey(p.ID.String())
}

// requestKey is the Idempotency-Key of the payout's next create under its
// key generation key: the key itself, or for the connected account's
// payout after its transfer, ConnectedPayoutKey of it.
func requestKey(p *Payout, key string) string {
	if p.step() == stepConnectedPayout {
		return psp.ConnectedPayoutKey(key)
	}
	return key
}

// attempt makes one payout attempt at the PSP: an optional lookup (adopt
// what exists; a new key only when the PSP confirms there is nothing), the
// create, and, when a definite failure follows an earlier unknown outcome,
// a lookup that decides whether the hold may be released.
//
// The create is on disk before it is on the wire: its key, attempt number
// and send time were committed with the move to SENDING_TO_GATEWAY (ahead,
// createAhead) or, after a lookup, are committed first (beginCreate), so
// that a call whose answer is never recorded is known to have been made.
// The error is only a failure to commit that record: then nothing was sent.
// lookupFirst is false when ahead is set. replay is an operator's replay of
// a NEEDS_REVIEW payout: a connected account's payout that failed is then
// sent again from that account's balance (the transfer is never sent
// again); any other attempt that finds one asks a person (record).
func (pr *Processor) attempt(ctx context.Context, client *psp.Guarded, p *Payout, lookupFirst, replay bool,
	ahead *sendingCreate) (attemptResult, error) {
	var a attemptResult
	id := p.ID.String()
	key := createKey(p)
	if lookupFirst {
		res, err := pr.find(ctx, client, p, &a)
		if err == nil && res.Attention == psp.AttentionConnectedPayout && replay {
			// The operator replays a payout whose connected payout failed:
			// its money is back in the connected account's balance, so
			// that payout is sent again (below), under a new key.
			res.PayoutMissing, res.Attention = true, ""
		}
		switch {
		case err == nil && res.PayoutMissing && !pr.settled(p):
			// The transfer is made; a connected account's payout whose
			// answer we lost may not have executed yet.
			a.transfer, a.unsettled = res.Transfer, true
			return a, nil
		case err == nil && res.PayoutMissing:
			// The transfer is made and the connected account has no payout
			// for it: that payout is sent (a new key generation, as it may
			// have been sent before), never a second transfer.
			a.transfer, p.PSPTransfer = res.Transfer, res.Transfer
			key = psp.AttemptKey(id, psp.KeyGeneration(id, key)+1)
			a.newKey = key
		case err == nil:
			a.res, a.adopted = res, true
			return a, nil
		case errors.Is(err, psp.ErrNotFound) && !pr.settled(p):
			// A slow create whose answer we lost may not have executed
			// yet: a new key now could make a second object.
			a.unsettled = true
			return a, nil
		case errors.Is(err, psp.ErrNotFound):
			key = psp.AttemptKey(id, psp.KeyGeneration(id, key)+1)
			a.newKey = key
		default:
			a.err = err
			return a, nil
		}
	}
	sendKey := requestKey(p, key)
	switch {
	case ahead != nil:
		sendKey, a.sentAt, a.createRow = ahead.key, ahead.at, ahead.row
	case plantedLateFirstAttempt():
		a.sentAt = pr.now()
	default:
		a.sentAt = pr.now()
		row, err := pr.beginCreate(ctx, p, beginning{key: sendKey, newKey: a.newKey, step: p.step(),
			transfer: a.transfer, at: a.sentAt}, a.requests)
		if errors.Is(err, errNotSending) {
			a.notSending = true
			return a, nil
		}
		if err != nil {
			return a, err
		}
		a.createRow, a.requests = row, nil // the lookups before it are recorded with it
	}
	pr.create(ctx, client, p, sendKey, &a)
	if a.err == nil && a.res.PayoutMissing && ctx.Err() == nil {
		// The transfer is made: the connected account's payout follows
		// at once, on disk (with the transfer) before it is on the wire.
		a.transfer, p.PSPTransfer = a.res.Transfer, a.res.Transfer
		sendKey = psp.ConnectedPayoutKey(key)
		a.sentAt = pr.now()
		row, err := pr.beginCreate(ctx, p, beginning{key: sendKey, step: stepConnectedPayout, transfer: a.transfer,
			at: a.sentAt}, a.requests)
		if errors.Is(err, errNotSending) {
			a.notSending = true
			return a, nil
		}
		if err != nil {
			// The transfer's answer is not recorded: the redelivery
			// resumes it as unknown and finds the transfer.
			return a, err
		}
		a.createRow, a.requests = row, nil
		pr.create(ctx, client, p, sendKey, &a)
	}

	if err := a.err; err != nil && p.OutcomeUnknown && pr.definite(err, p) && ctx.Err() == nil {
		// An earlier attempt may have paid: only the PSP saying it has no
		// object lets this failure release the hold.
		found, lerr := pr.find(ctx, client, p, &a)
		switch {
		case lerr == nil && found.PayoutMissing:
			// The transfer is made and the connected account has no payout:
			// the money is there, not ours to give back (record holds it).
			a.transfer = found.Transfer
		case lerr == nil:
			a.res, a.err, a.adopted = found, nil, true
		case errors.Is(lerr, psp.ErrNotFound) && pr.settled(p):
			a.confirmedAbsent = true
		case errors.Is(lerr, psp.ErrNotFound):
			// The unknown request may still pay: do not release yet.
			a.unsettled = true
		}
	}
	return a, nil
}

// create sends the payout's next create under key and records its answer
// in a.
func (pr *Processor) create(ctx context.Context, client *psp.Guarded, p *Payout, key string, a *attemptResult) {
	callCtx, cancel := context.WithTimeout(ctx, pr.cfg.CallTimeout)
	res, err := client.CreatePayout(callCtx, psp.Request{PayoutID: p.ID.String(), Amount: p.Amount, Currency: p.Currency,
		Destination: p.Destination, ExternalAccount: p.ExternalAccount, Transfer: p.PSPTransfer, IdempotencyKey: key})
	cancel()
	a.res, a.err, a.created = res, err, true
	r := pspRequest{kind: "create", key: key, step: p.step(), at: pr.now(), outcome: requestOutcome(err),
		ref: res.Reference, row: a.createRow}
	if err != nil {
		r.err = err.Error()
	}
	a.requests = append(a.requests, r)
}

// moveSending is move for a payout whose attempt starts: with c, the
// create's record goes in the same round trip (and so the same commit):
// first_attempt_at (if unset) and sending_at on the payout, and its
// "sending" payout_attempts row, whose id c gets; what beginCreate writes.
func moveSending(ctx context.Context, tx pgx.Tx, p *Payout, c *sendingCreate, steps ...step) (int64, error) {
	if c == nil {
		return move(ctx, tx, p, steps...)
	}
	b := &pgx.Batch{}
	arg := sqlcdb.RecordSendingParams{PayoutID: p.ID, Attempt: p.Attempts, IdempotencyKey: c.key, At: c.at, Step: c.step}
	if err := queueRow(b, func(q *sqlcdb.Queries) (int64, error) { return q.RecordSending(ctx, arg) }, func(id int64, err error) error {
		if err != nil {
			return fmt.Errorf("record payout %s create before sending it: %w", p.ID, err)
		}
		c.row = id
		return nil
	}); err != nil {
		return 0, err
	}
	at := c.at
	if p.FirstAttemptAt == nil {
		p.FirstAttemptAt = &at
	}
	p.SendingAt = &at
	return moveWith(ctx, tx, b, p, steps...)
}

// beginning is a create about to be sent: its key, the new key
// generation taken for it ("" none), its step and the transfer it follows
// (a connected account's payout), and its send time.
type beginning struct {
	key, newKey, step, transfer string
	at                          time.Time
}

// beginCreate commits, before the create is sent, what a resume needs to
// know that it may have been: the key (and a new key generation), the
// attempt number and the send time, on the payout (first_attempt_at,
// sending_at, and the transfer a connected account's payout follows) and
// as a payout_attempts row with outcome "sending", whose id it returns;
// with it, the requests made before it (earlier), so the history reads in
// the order the requests were made. errNotSending when the payout has left
// SENDING_TO_GATEWAY (nothing is written; the create must not be sent).
func (pr *Processor) beginCreate(ctx context.Context, p *Payout, c beginning, before []pspRequest) (int64, error) {
	var row int64
	err := database.InTx(ctx, pr.pool, func(tx pgx.Tx) error {
		if err := recordRequests(ctx, tx, p, before); err != nil {
			return err
		}
		var err error
		row, err = sqlcdb.New(tx).BeginCreate(ctx, sqlcdb.BeginCreateParams{PayoutID: p.ID, At: c.at,
			NewPspKey: c.newKey, PspTransfer: c.transfer, Attempt: p.Attempts, IdempotencyKey: c.key, Step: c.step})
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, errNotSending
	}
	if err != nil {
		return 0, fmt.Errorf("record payout %s create before sending it: %w", p.ID, err)
	}
	if p.FirstAttemptAt == nil {
		at := c.at
		p.FirstAttemptAt = &at
	}
	at := c.at
	p.SendingAt = &at
	if c.newKey != "" {
		p.PSPKey = c.newKey
	}
	return row, nil
}

// resumeUnknown is what a payout found in SENDING_TO_GATEWAY with a create
// whose answer was never recorded (sending_at) learns: the create may have
// executed at the PSP. Its outcome is unknown from the time it was sent,
// so the settle window runs from then, a later definite failure releases
// nothing unless a lookup confirms there is no object, and once the first
// attempt is older than the idempotency window the payout is looked up
// before anything is sent again (needsLookup). The create's row is marked
// unknown. It reports whether there was such a create.
func (pr *Processor) resumeUnknown(ctx context.Context, tx pgx.Tx, p *Payout) (bool, error) {
	if p.SendingAt == nil {
		return false, nil
	}
	sent := *p.SendingAt
	p.OutcomeUnknown = true
	if p.LastUnknownAt == nil || sent.After(*p.LastUnknownAt) {
		p.LastUnknownAt = &sent
	}
	if p.FirstAttemptAt == nil {
		p.FirstAttemptAt = &sent
	}
	p.SendingAt = nil
	if err := sqlcdb.New(tx).AbandonCreates(ctx, sqlcdb.AbandonCreatesParams{PayoutID: p.ID,
		Error: "the answer was never recorded (the worker stopped during the call); it may have executed"}); err != nil {
		return false, fmt.Errorf("mark payout %s unanswered creates unknown: %w", p.ID, err)
	}
	pr.logger.WarnContext(ctx, "payout resumed after a PSP call whose answer was never recorded; treated as unknown",
		"payout_id", p.ID, "sent_at", sent.UTC())
	return true, nil
}

// find looks the payout up and records the request.
func (pr *Processor) find(ctx context.Context, client *psp.Guarded, p *Payout, a *attemptResult) (psp.Result, error) {
	callCtx, cancel := context.WithTimeout(ctx, pr.cfg.CallTimeout)
	res, err := client.FindPayout(callCtx, p.lookup())
	cancel()
	r := pspRequest{kind: "lookup", at: pr.now(), ref: res.Reference}
	switch {
	case err == nil:
		r.outcome = reqFound
	case errors.Is(err, psp.ErrNotFound):
		r.outcome = reqNotFound
	default:
		r.outcome, r.err = reqUnknown, err.Error()
		err = fmt.Errorf("look the payout up: %w", err)
	}
	a.requests = append(a.requests, r)
	return res, err
}

// definite reports whether err ends the payout as failed if nothing else
// is known: a refusal, or a known non-execution on the last attempt.
func (pr *Processor) definite(err error, p *Payout) bool {
	switch errclass.Of(err) {
	case errclass.Permanent:
		return true
	case errclass.Transient:
		if _, ok := errclass.RetryAfterOf(err); ok || psp.OutcomeUnknown(err) {
			return false
		}
		return pr.cfg.Backoff.Exhausted(p.Attempts + 1)
	}
	return false
}

func requestOutcome(err error) string {
	switch {
	case err == nil:
		return reqAccepted
	case psp.OutcomeUnknown(err):
		return reqUnknown
	case errclass.Of(err) == errclass.Permanent:
		return reqRefused
	}
	return reqNotExecuted
}

// learn updates what the payout knows about the PSP after an attempt.
func (a attemptResult) learn(p *Payout, now time.Time) {
	if a.newKey != "" {
		p.PSPKey = a.newKey
	}
	if a.transfer != "" {
		p.PSPTransfer = a.transfer
	}
	if a.created {
		p.SendingAt = nil // the answer is recorded now
		if p.FirstAttemptAt == nil {
			// Only when the create was not recorded before it was sent
			// (the planted defect): first_attempt_at is set by beginCreate.
			t := now
			p.FirstAttemptAt = &t
		}
		if psp.OutcomeUnknown(a.err) {
			p.OutcomeUnknown = true
			if p.LastUnknownAt == nil || a.sentAt.After(*p.LastUnknownAt) {
				t := a.sentAt
				p.LastUnknownAt = &t
			}
		}
		p.LookupNeeded = a.err != nil && (psp.OutcomeUnknown(a.err) || psp.ServerError(a.err))
	}
	if a.adopted {
		p.LookupNeeded = false
	}
	if a.err == nil && (a.res.Final || a.res.Failed) && (p.PSPUpdatedAt == nil || now.After(*p.PSPUpdatedAt)) {
		// The PSP's own record as of now decides the payout: an outcome
		// event dated before it is older news, stale (finalize.go). Without
		// this a replayed old payout.failed could return a payout that a
		// lookup found paid, when its payout.paid webhook never came.
		t := now
		p.PSPUpdatedAt = &t
	}
}
