package pspsync

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
)

// Disagreement kinds.
const (
	// PaidNotSucceeded: the PSP paid an object whose payout is not
	// SUCCEEDED here (FAILED/FINALIZED at once; otherwise after the grace).
	PaidNotSucceeded = "paid_at_psp_not_succeeded"
	// SucceededNotPaid: SUCCEEDED here, and the PSP's object failed, was
	// reversed, is still pending after the grace, or does not exist.
	SucceededNotPaid = "succeeded_not_paid_at_psp"
	// PendingFailedHere: FAILED/FINALIZED here (the hold given back) while
	// the PSP's object is still pending after the grace: it may yet pay.
	PendingFailedHere = "pending_at_psp_failed_here"
	// UnknownPayout: the PSP holds an object for a payout id we do not have.
	UnknownPayout = "unknown_payout_at_psp"
	// ReturnNotPosted: a refund or dispute stored longer than the grace
	// has no ledger posting (payment_returns).
	ReturnNotPosted = "return_not_posted"
	// DoublePayment: the PSP holds more than one live (paid or pending)
	// object for one payout: the money leaves, or left, twice. Every
	// object's id is listed (PSPObjectIDs).
	DoublePayment = "double_payment_at_psp"
	// AmountMismatch, CurrencyMismatch, DestinationMismatch: a PSP object
	// for the payout moves a different amount, in a different currency, or
	// to a different destination than the payout asked.
	AmountMismatch      = "amount_mismatch"
	CurrencyMismatch    = "currency_mismatch"
	DestinationMismatch = "destination_mismatch"
	// ObjectMismatch: the payout's one live PSP object is not the object
	// recorded for it here (psp_reference): our record names another.
	ObjectMismatch = "psp_object_mismatch"
)

// Kinds are every disagreement kind.
func Kinds() []string {
	return []string{PaidNotSucceeded, SucceededNotPaid, PendingFailedHere, UnknownPayout, ReturnNotPosted,
		DoublePayment, AmountMismatch, CurrencyMismatch, DestinationMismatch, ObjectMismatch, BalanceMismatch}
}

// Disagreement is one thing the PSP and the ledger disagree on.
type Disagreement struct {
	Provider    string `json:"provider"`
	Kind        string `json:"kind"`
	PayoutID    string `json:"payout_id,omitempty"`
	PSPObjectID string `json:"psp_object_id,omitempty"`
	// PSPObjectIDs are every PSP object the disagreement is about when
	// there is more than one (a double payment: all of the payout's live
	// objects); PSPObjectID is the first of them.
	PSPObjectIDs []string `json:"psp_object_ids,omitempty"`
	PSPStatus    string   `json:"psp_status,omitempty"`
	LedgerStatus string   `json:"ledger_status,omitempty"`
	EventID      string   `json:"event_id,omitempty"`
	Detail       string   `json:"detail"`
	// Level is which of a two-step payout's objects (a payout to a
	// connected account's external account) the disagreement is about:
	// LevelTransfer (the platform's transfer to the connected account) or
	// LevelConnectedPayout (that account's payout); "" for a payout that
	// is one object at the PSP.
	Level string `json:"level,omitempty"`
	// State is StateNew (first seen by this run: dlq-admin pages) or
	// StateStillOpen (seen by an earlier run and not cleared since); set
	// when the run is stored, with FirstSeenAt.
	State       string     `json:"state,omitempty"`
	FirstSeenAt *time.Time `json:"first_seen_at,omitempty"`
}

// Disagreement states across runs (psp_disagreements).
const (
	StateNew       = "new"
	StateStillOpen = "still_open"
)

// Levels of a two-step payout (Disagreement.Level).
const (
	LevelTransfer        = "transfer"
	LevelConnectedPayout = "connected_payout"
)

// subject is what the disagreement is about, its identity across runs
// with the provider and kind: our payout id, else the PSP object's id. A
// two-step payout's connected level is its own subject
// (<payout id>/connected_payout), so that the same kind of disagreement on
// both levels is two disagreements, not one overwriting the other.
func (d Disagreement) subject() string {
	if d.PayoutID != "" {
		if d.Level == LevelConnectedPayout {
			return d.PayoutID + "/" + LevelConnectedPayout
		}
		return d.PayoutID
	}
	if d.PSPObjectID != "" {
		return d.PSPObjectID
	}
	return d.EventID
}

// ProviderReport is what one run read from one PSP.
type ProviderReport struct {
	WindowFrom time.Time `json:"window_from"`
	WindowTo   time.Time `json:"window_to"`
	Found      int       `json:"events_found"`
	Recovered  int       `json:"events_recovered"`
	Present    int       `json:"events_present"`
	// Recovered events by id (the first MaxListed).
	RecoveredIDs   []string `json:"recovered_event_ids"`
	ObjectsChecked int      `json:"objects_checked"`
	// ConnectedAccounts is how many connected accounts' events were read
	// (Connect); ConnectedPayoutsChecked how many payouts to a connected
	// account's external account were compared on both levels.
	ConnectedAccounts       int `json:"connected_accounts_read"`
	ConnectedPayoutsChecked int `json:"connected_payouts_checked"`
	// Errors: events that could not be put through the webhook path and
	// the reads that failed. A failed read leaves the cursor where it was.
	Errors        []string `json:"errors"`
	CursorAdvance bool     `json:"cursor_advanced"`
	// Balance compares the PSP's balance with its clearing account, per
	// currency (balance.go); the next run's baseline.
	Balance []BalanceCheck `json:"balance,omitempty"`
	// Compared: the PSP's objects and our records were compared in full,
	// so an earlier disagreement this run did not find is cleared. A
	// comparison that failed part way clears nothing.
	Compared bool `json:"compared"`
}

// Report is a run's result.
type Report struct {
	Found, Recovered, Present int
	Providers                 map[string]*ProviderReport
	Disagreements             []Disagreement
}

// MaxListed bounds the ids and errors a report lists.
const MaxListed = 100

// maxChecked bounds the payouts and stored returns one run checks per PSP.
const maxChecked = 10_000

// Saver commits a webhook through the webhook path: *ingest.Store.
type Saver interface {
	Save(ctx context.Context, p ingest.Pending) (ingest.Saved, error)
}

// Config is the window the job reads.
type Config struct {
	// Window is how far back the first run reads events, and how far
	// before the window's start objects, SUCCEEDED payouts and stored
	// refunds/disputes are compared (PSP_RECONCILE_WINDOW).
	Window time.Duration
	// Overlap is read again before the cursor, so an event the PSP dated
	// just before the last run's end is not missed (PSP_RECONCILE_OVERLAP).
	Overlap time.Duration
	// Grace is how long a disagreement that may still be in flight (a
	// webhook on its way, a posting queued) is given (PSP_RECONCILE_GRACE).
	Grace time.Duration
	// BalanceTolerance is the unexplained move of the difference between
	// a PSP's balance and its clearing account, in minor units, that is
	// not a disagreement (zero: DefaultBalanceTolerance).
	BalanceTolerance int64
}

// Reconciler runs one reconciliation over every configured PSP.
type Reconciler struct {
	cfg     Config
	runs    *Runs
	saver   Saver
	sources []Source
	logger  *slog.Logger
}

// NewReconciler returns a Reconciler for sources.
func NewReconciler(cfg Config, runs *Runs, saver Saver, sources []Source, deps lifecycle.Deps) *Reconciler {
	deps = deps.WithDefaults()
	return &Reconciler{cfg: cfg, runs: runs, saver: saver, sources: sources, logger: deps.Logger}
}

func (r *Reconciler) providers() []string {
	out := make([]string, 0, len(r.sources))
	for _, s := range r.sources {
		out = append(out, s.Provider())
	}
	return out
}

// Run reconciles every PSP for run id at now (the database's time). One
// PSP failing does not stop the others; the error names those that failed.
func (r *Reconciler) Run(ctx context.Context, id int64, now time.Time) (Report, error) {
	rep := Report{Providers: map[string]*ProviderReport{}}
	var errs []error
	for _, src := range r.sources {
		pr, dis, err := r.provider(ctx, id, now, src)
		rep.Providers[src.Provider()] = pr
		rep.Found += pr.Found
		rep.Recovered += pr.Recovered
		rep.Present += pr.Present
		rep.Disagreements = append(rep.Disagreements, dis...)
		if err != nil {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			errs = append(errs, fmt.Errorf("%s: %w", src.Provider(), err))
		}
	}
	return rep, errors.Join(errs...)
}

func (r *Reconciler) normalize(provider string, body []byte, now time.Time) (ingest.Normalized, error) {
	if provider == ingest.Paystack {
		return ingest.NormalizePaystack(body, now)
	}
	return ingest.NormalizeStripe(body, now)
}

func (pr *ProviderReport) errorf(format string, args ...any) {
	if len(pr.Errors) < MaxListed {
		pr.Errors = append(pr.Errors, fmt.Sprintf(format, args...))
	}
}

func (r *Reconciler) provider(ctx context.Context, runID int64, now time.Time, src Source) (*ProviderReport, []Disagreement, error) {
	p := src.Provider()
	from := now.Add(-r.cfg.Window)
	cursor, ok, err := r.runs.Cursor(ctx, p)
	if err != nil {
		return &ProviderReport{WindowFrom: from, WindowTo: now, Errors: []string{err.Error()}}, nil, err
	}
	if ok {
		from = cursor.Add(-r.cfg.Overlap)
	}
	pr := &ProviderReport{WindowFrom: from, WindowTo: now, RecoveredIDs: []string{}, Errors: []string{}}

	lastEventID, evErr := r.events(ctx, runID, now, src, from, pr)
	if evErr == nil {
		if err := r.runs.SetCursor(ctx, p, now, lastEventID, runID); err != nil {
			return pr, nil, err
		}
		pr.CursorAdvance = true
	}
	// Objects and postings are compared even when the events could not be
	// read: a disagreement is worth knowing either way.
	dis, cmpErr := r.compare(ctx, now, src, from.Add(-r.cfg.Window), pr)
	// The balance last: the events recovered above are its credits not
	// posted yet, not money it cannot explain.
	checks, balDis, balErr := r.balances(ctx, runID, src, from.Add(-r.cfg.Window))
	if balErr != nil {
		pr.errorf("compare the balance: %v", balErr)
	}
	pr.Balance = checks
	dis = append(dis, balDis...)
	pr.Compared = cmpErr == nil && balErr == nil
	return pr, dis, errors.Join(evErr, cmpErr, balErr)
}

// events puts every event of the window that is not stored yet through the
// webhook path (normalise → store: deduplicated by PSP event id, so a
// webhook arriving later, or a concurrent one, is answered duplicate). A
// PSP with connected accounts (Connect) has each connected account's
// events read as well, for every account a payout to one of its external
// accounts is in flight on or changed within the window: the platform's
// listing does not show them. One account whose events cannot be read is
// reported and the others are still read; the cursor then stays.
func (r *Reconciler) events(ctx context.Context, runID int64, now time.Time, src Source, from time.Time, pr *ProviderReport) (string, error) {
	p := src.Provider()
	var readErrs []error
	var lists [][]Pulled
	platform, err := src.Events(ctx, from)
	platformRead := err == nil
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		pr.errorf("read events: %v", err)
		readErrs = append(readErrs, err)
	} else {
		lists = append(lists, platform)
	}
	if c, ok := src.(Connect); ok {
		accounts, err := r.connectedAccounts(ctx, p, from)
		if err != nil {
			pr.errorf("%v", err)
			readErrs = append(readErrs, err)
		}
		for _, account := range accounts {
			evs, err := c.AccountEvents(ctx, account, from)
			if err != nil {
				if ctx.Err() != nil {
					return "", ctx.Err()
				}
				pr.errorf("read events of %s: %v", account, err)
				readErrs = append(readErrs, err)
				continue
			}
			pr.ConnectedAccounts++
			lists = append(lists, evs)
		}
	}
	type candidate struct {
		n    ingest.Normalized
		body []byte
	}
	// Each list oldest first, as the webhooks would have come.
	var cands []candidate
	ids := []string{}
	lastEventID := ""
	for li, pulled := range lists {
		pr.Found += len(pulled)
		for i := len(pulled) - 1; i >= 0; i-- {
			body := pulled[i].Body
			n, err := r.normalize(p, body, now)
			if err != nil {
				// One bad event never stops the others; it is reported.
				pr.errorf("event not normalised: %v", err)
				continue
			}
			if li == 0 && platformRead {
				lastEventID = n.Event.EventID // the platform's newest so far
			}
			cands = append(cands, candidate{n: n, body: body})
			ids = append(ids, n.Event.EventID)
		}
	}
	if len(lists) > 1 {
		// The accounts' events among the platform's, by when they happened
		// (a transfer's before the connected payout's it funded); the
		// sort is stable, so each list keeps its order within a second.
		sort.SliceStable(cands, func(i, j int) bool { return cands[i].n.Event.OccurredAt.Before(cands[j].n.Event.OccurredAt) })
	}
	known, err := r.runs.Known(ctx, p, ids)
	if err != nil {
		pr.errorf("%v", err)
		return "", err
	}
	// An event that cannot be stored is reported and the others still are;
	// the cursor then stays.
	var storeErr error
	for _, c := range cands {
		if known[c.n.Event.EventID] {
			pr.Present++
			continue
		}
		saved, err := r.saver.Save(ctx, ingest.Pending{Event: c.n, Body: c.body,
			CorrelationID: "psp-reconciliation-" + strconv.FormatInt(runID, 10) + "-" + c.n.Event.EventID})
		if err != nil {
			if ctx.Err() != nil {
				return "", ctx.Err()
			}
			pr.errorf("event %s not stored: %v", c.n.Event.EventID, err)
			if storeErr == nil {
				storeErr = fmt.Errorf("store event %s: %w", c.n.Event.EventID, err)
			}
			continue
		}
		if saved.Outcome == ingest.Duplicate { // its webhook came meanwhile
			pr.Present++
			continue
		}
		pr.Recovered++
		if len(pr.RecoveredIDs) < MaxListed {
			pr.RecoveredIDs = append(pr.RecoveredIDs, saved.EventID)
		}
		r.logger.InfoContext(ctx, "psp event recovered by reconciliation", "provider", p, "event_id", saved.EventID,
			"type", c.n.Event.Type, "account", c.n.Event.Account, "outcome", string(saved.Outcome), "run_id", runID)
	}
	if err := errors.Join(append(readErrs, storeErr)...); err != nil {
		return "", err
	}
	return lastEventID, nil
}

// connectedAccounts are the connected accounts with a payout to one of
// their external accounts in flight or changed since since, in the order
// of their newest such payout.
func (r *Reconciler) connectedAccounts(ctx context.Context, p string, since time.Time) ([]string, error) {
	rows, ids, err := r.runs.connected(ctx, p, since, r.cfg.Grace, maxChecked)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var accounts []string
	for _, id := range ids {
		if a := rows[id].Destination; !seen[a] {
			seen[a] = true
			accounts = append(accounts, a)
		}
	}
	return accounts, nil
}

// compare checks the PSP's payouts against ours, ours against the PSP's,
// and stored refunds and disputes against their ledger postings.
func (r *Reconciler) compare(ctx context.Context, now time.Time, src Source, since time.Time, pr *ProviderReport) ([]Disagreement, error) {
	p := src.Provider()
	var dis []Disagreement
	var errs []error
	objects, err := src.Objects(ctx, since)
	if err != nil {
		pr.errorf("read objects: %v", err)
		errs = append(errs, err)
	}
	pr.ObjectsChecked = len(objects)
	seen := map[string]bool{}
	ids := make([]string, 0, len(objects))
	// The PSP's objects per payout, in the order listed: a payout may have
	// several (an attempt that failed and the one after it; or a double
	// payment).
	byPayout := map[string][]Object{}
	var keys []string
	for _, o := range objects {
		if o.PayoutID == "" {
			continue
		}
		key := o.PayoutID
		// Our payout ids are UUIDs; anything else cannot be ours (judged
		// unknown below).
		if u, err := uuid.Parse(o.PayoutID); err == nil {
			key = u.String()
			ids = append(ids, key)
		}
		if _, ok := byPayout[key]; !ok {
			keys = append(keys, key)
		}
		byPayout[key] = append(byPayout[key], o)
	}
	ours, err := r.runs.payouts(ctx, ids, r.cfg.Grace)
	if err != nil {
		return dis, errors.Join(append(errs, err)...)
	}
	connect, isConnect := src.(Connect)
	// Payouts to a connected account's external account seen in the
	// listing: compared on both levels by compareConnected.
	var twoStep []string
	for _, key := range keys {
		seen[key] = true
		group := byPayout[key]
		row, exists := ours[key]
		if exists && row.ExternalAccount != "" && isConnect {
			twoStep = append(twoStep, key)
			continue
		}
		if d, ok := judge(p, decisive(group), row, exists); ok {
			dis = append(dis, d)
		}
		if exists {
			dis = append(dis, compareMoney(p, key, group, row)...)
		}
	}
	if isConnect {
		cd, err := r.compareConnected(ctx, src, connect, since, byPayout, ours, twoStep, pr)
		dis = append(dis, cd...)
		if err != nil {
			if ctx.Err() != nil {
				return dis, ctx.Err()
			}
			errs = append(errs, err)
		}
	}
	succeeded, err := r.runs.succeeded(ctx, p, since, maxChecked)
	if err != nil {
		return dis, errors.Join(append(errs, err)...)
	}
	for _, s := range succeeded {
		if seen[s.ID] {
			continue
		}
		o, err := src.Lookup(ctx, s.ID, s.PSPReference)
		switch {
		case errors.Is(err, ErrNotFound):
			dis = append(dis, Disagreement{Provider: p, Kind: SucceededNotPaid, PayoutID: s.ID, PSPObjectID: s.PSPReference,
				PSPStatus: "not_found", LedgerStatus: string(payoutstate.Succeeded),
				Detail: string(payoutstate.Succeeded) + " here; the PSP has no such object"})
		case err != nil:
			pr.errorf("look up payout %s: %v", s.ID, err)
			errs = append(errs, err)
		case o.Verdict != PSPPaid:
			dis = append(dis, Disagreement{Provider: p, Kind: SucceededNotPaid, PayoutID: s.ID, PSPObjectID: o.ID,
				PSPStatus: o.Status, LedgerStatus: string(payoutstate.Succeeded),
				Detail: string(payoutstate.Succeeded) + " here; the PSP's object is " + o.Status})
			dis = append(dis, compareMoney(p, s.ID, []Object{o}, s.Row)...)
		default:
			// Paid: looked up by the object recorded here, so only its
			// money can disagree (a second object is for the listing).
			dis = append(dis, compareMoney(p, s.ID, []Object{o}, s.Row)...)
		}
	}

	// Double payments first: an alert names only the first few.
	sort.SliceStable(dis, func(i, j int) bool { return dis[i].Kind == DoublePayment && dis[j].Kind != DoublePayment })

	stored, err := r.runs.storedReturns(ctx, p, since, r.cfg.Grace, maxChecked)
	if err != nil {
		return dis, errors.Join(append(errs, err)...)
	}
	for _, ev := range stored {
		n, err := r.normalize(p, ev.Payload, now)
		if err != nil || (n.Event.Action != event.ActionRefund && n.Event.Action != event.ActionDispute) {
			continue
		}
		kind := "refund"
		if n.Event.Action == event.ActionDispute {
			kind = "dispute"
		}
		for _, ret := range n.Event.Returns {
			if ret.ID == "" {
				continue
			}
			ok, err := r.runs.returnPosted(ctx, p, kind, ret.ID)
			if err != nil {
				return dis, errors.Join(append(errs, err)...)
			}
			if !ok {
				dis = append(dis, Disagreement{Provider: p, Kind: ReturnNotPosted, PSPObjectID: ret.ID, EventID: ev.EventID,
					PSPStatus: ret.Outcome, Detail: fmt.Sprintf("%s %s of payment %s (%d %s) stored longer than the grace with no ledger posting",
						kind, ret.ID, n.Event.Reference, ret.Amount, ret.Currency)})
			}
		}
	}
	return dis, errors.Join(errs...)
}

// decisive is the object whose status stands for the payout at the PSP: a
// paid one, else a pending one, else the last listed (all failed).
func decisive(group []Object) Object {
	best := group[len(group)-1]
	for _, o := range group {
		switch {
		case o.Verdict == PSPPaid:
			return o
		case o.Verdict == PSPPending && best.Verdict == PSPFailed:
			best = o
		}
	}
	return best
}

// compareMoney compares the payout's PSP objects with what the payout
// asked: more than one live object is a double payment; each object's
// amount, currency and destination must be the payout's (an object that
// failed moved nothing, but one sent with the wrong amount or to the wrong
// account is a defect all the same); and its one live object must be the
// one recorded here once the payout has settled. One disagreement per kind
// per payout, naming every object concerned.
func compareMoney(p, payoutID string, group []Object, ours payoutRow) []Disagreement {
	var dis []Disagreement
	add := func(kind, detail string, objs []Object) {
		d := Disagreement{Provider: p, Kind: kind, PayoutID: payoutID, PSPObjectID: objs[0].ID, PSPStatus: objs[0].Status,
			LedgerStatus: ours.Status, Detail: detail}
		if len(objs) > 1 {
			for _, o := range objs {
				d.PSPObjectIDs = append(d.PSPObjectIDs, o.ID)
			}
		}
		dis = append(dis, d)
	}
	var live, amount, currency, destination []Object
	for _, o := range group {
		if o.Verdict != PSPFailed {
			live = append(live, o)
		}
		if o.Amount != ours.Amount {
			amount = append(amount, o)
		}
		if !strings.EqualFold(o.Currency, ours.Currency) {
			currency = append(currency, o)
		}
		if (o.Destination != "" && o.Destination != ours.Destination) || o.Account != ours.Account {
			destination = append(destination, o)
		}
	}
	if len(live) > 1 {
		add(DoublePayment, fmt.Sprintf("%d live objects at the PSP for one payout (%s); %s here",
			len(live), describe(live), ours.Status), live)
	}
	if len(amount) > 0 {
		add(AmountMismatch, fmt.Sprintf("the payout is %d %s; at the PSP %s", ours.Amount, ours.Currency, describe(amount)), amount)
	}
	if len(currency) > 0 {
		add(CurrencyMismatch, fmt.Sprintf("the payout is in %s; at the PSP %s", ours.Currency, describe(currency)), currency)
	}
	if len(destination) > 0 {
		to := ours.Destination
		if ours.Account != "" {
			to += " on " + ours.Account
		}
		add(DestinationMismatch, fmt.Sprintf("the payout goes to %s; at the PSP %s", to, describe(destination)), destination)
	}
	// The reference is recorded with the outcome: before the payout has
	// settled it may still be on its way.
	// A Paystack payout may record its reference (our payout id) when the
	// PSP's answer carried no transfer code: that names no other object.
	recorded := ours.PSPReference != "" && ours.PSPReference != payoutID
	if len(live) == 1 && ours.Settled && recorded && live[0].ID != ours.PSPReference {
		add(ObjectMismatch, fmt.Sprintf("the PSP's live object is %s; %s is recorded here", describe(live), ours.PSPReference), live)
	}
	return dis
}

// describe names objects for a disagreement's detail.
func describe(objs []Object) string {
	parts := make([]string, len(objs))
	for i, o := range objs {
		parts[i] = fmt.Sprintf("%s %s %d %s", o.ID, o.Status, o.Amount, o.Currency)
		if o.Destination != "" {
			parts[i] += " to " + o.Destination
		}
		if o.Account != "" {
			parts[i] += " on " + o.Account
		}
	}
	return strings.Join(parts, ", ")
}

// judge compares one PSP object with our payout (exists false: none).
func judge(p string, o Object, ours payoutRow, exists bool) (Disagreement, bool) {
	d := Disagreement{Provider: p, PayoutID: o.PayoutID, PSPObjectID: o.ID, PSPStatus: o.Status, LedgerStatus: ours.Status}
	switch {
	case !exists:
		d.Kind, d.Detail = UnknownPayout, "the PSP holds a "+o.Kind+" for a payout id unknown here"
		return d, true
	case o.Verdict == PSPPaid && ours.Status != string(payoutstate.Succeeded):
		if !payoutstate.Status(ours.Status).Unpaid() && !ours.Settled {
			return d, false // its outcome may still be on its way
		}
		d.Kind, d.Detail = PaidNotSucceeded, "paid at the PSP; "+ours.Status+" here"
		return d, true
	case o.Verdict == PSPPending && payoutstate.Status(ours.Status).Unpaid():
		if !ours.Settled {
			return d, false
		}
		d.Kind, d.Detail = PendingFailedHere, "pending at the PSP; "+ours.Status+" here (its hold was given back)"
		return d, true
	case o.Verdict != PSPPaid && ours.Status == string(payoutstate.Succeeded):
		if !ours.Settled {
			return d, false
		}
		d.Kind, d.Detail = SucceededNotPaid, string(payoutstate.Succeeded)+" here; "+o.Status+" at the PSP"
		return d, true
	}
	return d, false
}
