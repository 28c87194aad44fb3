package payout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/inbox"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout/sqlcdb"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/psp"
)

// Resolution statuses: pending until decided, then the worker's verdict
// (resolution_verdicts.status, read with the request through
// payout_resolutions_for_worker).
const (
	ResolutionPending = "pending"
	ResolutionApplied = "applied"
	ResolutionRefused = "refused"
)

// resolution is an operator's request as dlq-admin stored it, with its
// status.
type resolution struct {
	id          uuid.UUID
	payoutID    uuid.UUID
	outcome     string
	reason      string
	pspObjectID string
	operator    string
	approvedBy  string
	status      string
}

func loadResolution(ctx context.Context, tx pgx.Tx, id uuid.UUID) (*resolution, error) {
	row, err := sqlcdb.New(tx).LoadResolution(ctx, id)
	r := &resolution{id: id, payoutID: row.PayoutID, outcome: row.Outcome, reason: row.Reason,
		pspObjectID: row.PSPObjectID, operator: row.RequestedBy, approvedBy: row.ApprovedBy, status: row.Status}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errclass.AsPermanent(fmt.Errorf("payout resolution %s does not exist", id))
	}
	if err != nil {
		return nil, fmt.Errorf("load payout resolution %s: %w", id, err)
	}
	return r, nil
}

// pspAnswer is what the PSP's own record says about a payout, looked up
// for a resolution.
type pspAnswer struct {
	asked bool // false: no client for the provider
	res   psp.Result
	err   error
	at    time.Time
}

// Resolve applies an operator's resolution of a NEEDS_REVIEW payout
// (event.PayoutResolution, sent by dlq-admin): → SUCCEEDED with the hold
// settled, or → FAILED → FINALIZED with the hold released, in one
// transaction that also records the verdict on the resolution, the
// operator, reason and evidence on the payout (a transition's detail and a
// payout_evidence row), and the outcome event.
//
// The operator's word is evidence, checked against the PSP's own record
// first (a lookup by the payout's id, as the sweeper does, outside any
// transaction); see judge. The resolution is refused, and nothing moves,
// when the PSP contradicts it: it has the object paid and the operator says
// failed (the money must not come back while the PSP paid), or failed and
// the operator says paid; the object is still pending there; it is another
// object than the evidence names, or its amount, currency or payout id
// (metadata payout_id, Paystack reference) are not the payout's; the PSP
// has no object for the payout and the operator says paid; the PSP could
// not be asked (a lookup error, or no client for the provider: resolve
// again); or it has no object but a request whose outcome is unknown may
// still be executing (the settle window). A failed resolution of a payout
// the PSP has no object for, past the settle window, is applied: the PSP
// itself says nothing is live. A paid resolution of a payout whose hold
// was already released is refused: there is no hold left to settle. The
// verdict and its reason are a resolution_verdicts row (status,
// psp_answer), which dlq-admin shows the operator; payout_resolutions is
// dlq-admin's.
//
// Idempotent by resolution id: the resolution is decided once, under the
// payout's row lock, and read after taking it, so a replayed or
// redelivered command finds it decided and changes nothing; the verdict's
// primary key refuses a second one.
func (pr *Processor) Resolve(ctx context.Context, m inbox.Message) error {
	var cmd event.PayoutResolution
	if err := json.Unmarshal(m.Value, &cmd); err != nil {
		return errclass.AsPoison(fmt.Errorf("payout resolution is not decodable: %w", err))
	}
	rid, err := uuid.Parse(cmd.ResolutionID)
	if err != nil {
		return errclass.AsPoison(fmt.Errorf("payout resolution is not decodable: resolution_id %q is not a UUID", cmd.ResolutionID))
	}

	// 1. Is there anything to decide? Read without keeping locks: the PSP
	// is not called inside a transaction.
	var p *Payout
	var r *resolution
	err = database.InTx(ctx, pr.pool, func(tx pgx.Tx) error {
		if done, err := inbox.Processed(ctx, tx, m); err != nil || done {
			return err
		}
		if r, err = loadResolution(ctx, tx, rid); err != nil {
			return err
		}
		p, err = load(ctx, tx, r.payoutID.String())
		return err
	})
	if err != nil || r == nil {
		return err
	}
	var ans pspAnswer
	if r.status == ResolutionPending && p.Status == NeedsReview {
		ans = pr.lookUpForResolution(ctx, p)
	}

	// 2. Decide, in one transaction. The payout's row lock first (a
	// resolution's payout never changes): every verdict on the payout is
	// written under it, so the resolution read after it shows any verdict
	// committed before.
	payoutID := r.payoutID
	return inbox.InTx(ctx, pr.pool, m, func(tx pgx.Tx) error {
		p, err := load(ctx, tx, payoutID.String())
		if err != nil {
			return err
		}
		r, err := loadResolution(ctx, tx, rid)
		if err != nil {
			return err
		}
		if r.status != ResolutionPending {
			// Decided already (a replayed command): nothing changes.
			pr.logger.InfoContext(ctx, "payout resolution already decided", "resolution_id", rid, "status", r.status)
			return nil
		}
		if ans.asked {
			req := pspRequest{kind: "lookup", outcome: reqFound, ref: ans.res.Reference, at: ans.at}
			switch {
			case errors.Is(ans.err, psp.ErrNotFound):
				req.outcome, req.ref = reqNotFound, ""
			case ans.err != nil:
				req.outcome, req.ref, req.err = reqUnknown, "", ans.err.Error()
			}
			if err := recordRequests(ctx, tx, p, []pspRequest{req}); err != nil {
				return err
			}
		}
		answer, refusal, err := pr.judge(ctx, tx, p, r, ans)
		if err != nil {
			return err
		}
		ev := evidence{provider: p.Provider, eventID: "resolution:" + rid.String(), eventType: "operator_resolution",
			amount: p.Amount, currency: p.Currency, reference: r.pspObjectID}
		if refusal != "" {
			ev.verdict, ev.reason = verdictRecorded, fmt.Sprintf("resolution as %s by %s refused: %s", r.outcome, r.operator, refusal)
			if err := recordEvidence(ctx, tx, p, ev); err != nil {
				return err
			}
			pr.logger.WarnContext(ctx, "payout resolution refused", "resolution_id", rid, "payout_id", p.ID,
				"outcome", r.outcome, "operator", r.operator, "why", refusal)
			return decide(ctx, tx, rid, ResolutionRefused, refusal+" (PSP: "+answer+")", pr.now())
		}
		ev.verdict, ev.reason = verdictApplied, fmt.Sprintf("resolved as %s by %s: %s", r.outcome, r.operator, r.reason)
		if err := recordEvidence(ctx, tx, p, ev); err != nil {
			return err
		}
		detail := map[string]any{"resolution_id": rid.String(), "operator": r.operator, "reason": r.reason,
			"psp_object_id": r.pspObjectID, "psp_answer": answer}
		if r.approvedBy != "" {
			detail["approved_by"] = r.approvedBy
		}
		if ans.res.Status != "" {
			p.PSPStatus = ans.res.Status
		}
		if r.outcome == event.ResolutionPaid {
			if p.PSPReference == "" {
				p.PSPReference = r.pspObjectID
			}
			err = pr.paid(ctx, tx, p, detail)
		} else {
			err = pr.failedAtPSP(ctx, tx, p, fmt.Sprintf("resolved as failed by %s: %s", r.operator, r.reason), detail)
		}
		if err != nil {
			return err
		}
		pr.logger.InfoContext(ctx, "payout resolved by an operator", "resolution_id", rid, "payout_id", p.ID,
			"outcome", r.outcome, "operator", r.operator, "psp_answer", answer)
		return decide(ctx, tx, rid, ResolutionApplied, answer, pr.now())
	})
}

// lookUpForResolution asks the PSP for the payout's object.
func (pr *Processor) lookUpForResolution(ctx context.Context, p *Payout) pspAnswer {
	client, err := pr.psps.Get(p.Provider)
	if err != nil {
		return pspAnswer{at: pr.now()}
	}
	callCtx, cancel := context.WithTimeout(ctx, pr.cfg.CallTimeout)
	defer cancel()
	res, err := client.FindPayout(callCtx, p.lookup())
	return pspAnswer{asked: true, res: res, err: err, at: pr.now()}
}

// judge says what the PSP answered (for the record) and why the resolution
// must be refused, or "" when it may be applied. The operator's word moves
// money only on the PSP's own record: paid needs the PSP's object for this
// payout, the very object the operator names, paid, for the payout's
// amount and currency and carrying its id; failed needs the PSP to say
// there is no live object (none at all once the settle window has passed,
// or the object the operator names, failed). Without an answer from the
// PSP (no client, a failed lookup) nothing is decided.
func (pr *Processor) judge(ctx context.Context, tx pgx.Tx, p *Payout, r *resolution, ans pspAnswer) (answer, refusal string, err error) {
	if p.Status != NeedsReview {
		return "not asked", fmt.Sprintf("the payout is %s, not NEEDS_REVIEW", p.Status), nil
	}
	switch {
	case !ans.asked:
		answer = fmt.Sprintf("no client for provider %s is configured", p.Provider)
		return answer, fmt.Sprintf("the PSP's record cannot be checked (no %s client is configured): "+
			"a resolution moves money only on the PSP's own record", p.Provider), nil
	case errors.Is(ans.err, psp.ErrNotFound):
		answer = "the PSP has no object for the payout"
		if r.outcome == event.ResolutionPaid {
			return answer, fmt.Sprintf("the PSP has no object carrying this payout's id, so %s cannot be its payment: "+
				"nothing is settled on an object the PSP does not tie to the payout", r.pspObjectID), nil
		}
		if !pr.settled(p) {
			return answer, fmt.Sprintf("a request whose outcome is unknown may still be executing at the PSP until %s; "+
				"resolve again after that", pr.settleAt(p).UTC().Format(time.RFC3339)), nil
		}
	case ans.err != nil:
		answer = "lookup failed: " + ans.err.Error()
		return answer, "the PSP could not be asked, so the evidence could not be checked; nothing changed, resolve again", nil
	default:
		answer = fmt.Sprintf("object %s is %q", ans.res.Reference, ans.res.Status)
		switch {
		case ans.res.Reference == "":
			return answer, "the PSP's answer names no object id, so the evidence could not be checked", nil
		case ans.res.Reference != r.pspObjectID:
			return answer, fmt.Sprintf("the PSP's object for this payout is %s, not %s as the evidence says",
				ans.res.Reference, r.pspObjectID), nil
		case evidenceMismatch(p, ans.res) != "":
			return answer, "the PSP's object does not match the payout: " + evidenceMismatch(p, ans.res), nil
		case ans.res.PayoutMissing || ans.res.Attention == psp.AttentionConnectedPayout:
			return answer, fmt.Sprintf("transfer %s moved the money to connected account %s and no payout of it there "+
				"is paid: neither paid nor failed for us. Reverse the transfer at Stripe (its transfer.reversed gives "+
				"the money back to the wallet), or pay it out from the connected account and resolve again",
				ans.res.Transfer, p.Destination), nil
		case ans.res.Failed && r.outcome == event.ResolutionPaid:
			return answer, "the PSP says the payout failed, the operator says paid", nil
		case ans.res.Final && !ans.res.Failed && r.outcome == event.ResolutionFailed:
			return answer, "the PSP says the payout was paid, the operator says failed: the hold is not given back", nil
		case !ans.res.Final && !ans.res.Failed:
			return answer, "the PSP's object is still pending; its outcome will move the payout on", nil
		}
	}
	if r.outcome == event.ResolutionPaid {
		released, err := ledger.Posted(ctx, tx, ledger.KindPayoutRelease, p.ID.String())
		if err != nil {
			return "", "", err
		}
		if released {
			return answer, "the payout's hold was already released: there is no hold left to settle; recover the money by hand", nil
		}
	}
	return answer, "", nil
}

// evidenceMismatch says how the looked-up object differs from the payout,
// strictly: unlike the sweeper's lookupMismatch, an object that does not
// state its amount, currency or payout id does not match (a resolution
// settles or releases a hold on it).
func evidenceMismatch(p *Payout, res psp.Result) string {
	var why []string
	if res.Amount != p.Amount {
		why = append(why, fmt.Sprintf("amount %d, payout's %d", res.Amount, p.Amount))
	}
	if !strings.EqualFold(res.Currency, p.Currency) {
		why = append(why, fmt.Sprintf("currency %q, payout's %q", res.Currency, p.Currency))
	}
	if res.PayoutID != p.ID.String() {
		why = append(why, fmt.Sprintf("it carries payout id %q (metadata payout_id / reference), not this payout's", res.PayoutID))
	}
	if p.PSPReference != "" && res.Reference != p.PSPReference {
		why = append(why, fmt.Sprintf("PSP reference %q, payout's %q", res.Reference, p.PSPReference))
	}
	return strings.Join(why, "; ")
}

func decide(ctx context.Context, tx pgx.Tx, id uuid.UUID, status, answer string, at time.Time) error {
	n, err := sqlcdb.New(tx).DecideResolution(ctx, sqlcdb.DecideResolutionParams{ResolutionID: id, Status: status,
		PSPAnswer: answer, DecidedAt: at})
	if err != nil {
		return fmt.Errorf("record payout resolution %s: %w", id, err)
	}
	if n != 1 {
		// Decided meanwhile: this transaction, and what it posted, is
		// rolled back; the command is retried and finds it decided.
		return fmt.Errorf("record payout resolution %s: it is already decided", id)
	}
	return nil
}
