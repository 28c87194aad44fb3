package chaos

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
	"github.com/aegis-payments/aegis/tools/devstack/internal/published"
)

// WeekFigures are the week profile's per-seed figures.
type WeekFigures struct {
	// Payouts created; Lookups are the PSP reads of one payout or transfer
	// (sweeper, settle-window and resume lookups, reconciliation reads).
	Payouts, Lookups int
	// DeadlinesHit counts (payout, state) pairs that outlived the state's
	// deadline (Deadlines, less the time no worker ran); Escalations the payouts sent to NEEDS_REVIEW.
	DeadlinesHit, Escalations int
	// DoubleRefused counts payout creates the PSP answered from what it
	// already had (an idempotent replay, a key in use, a Paystack
	// reference already taken): second payments refused by the PSP.
	DoubleRefused int
	// Alerts received.
	Alerts int
	// Endpoints are the outbound receivers' figures, one per endpoint.
	Endpoints []EndpointFigures
	// Forged money events sent.
	Forged int
	// OTPSeen are the Paystack transfers seen waiting for an OTP; of
	// them, OTPNamed are named in a page and OTPFolded have a letter whose
	// class paged (invariant 17).
	OTPSeen, OTPNamed, OTPFolded int
}

// EndpointFigures are one outbound endpoint's receiver's figures: events
// delivered (distinct webhook-ids), Duplicates (deliveries of a webhook-id
// already received: at least once, not a fault), Refused while down,
// Unverified (refused by the Standard Webhooks library).
type EndpointFigures struct {
	Name                                       string
	Delivered, Duplicates, Refused, Unverified int
}

func (f *WeekFigures) lines() []string {
	if f == nil {
		return nil
	}
	endpoints := make([]string, 0, len(f.Endpoints))
	for _, e := range f.Endpoints {
		endpoints = append(endpoints, fmt.Sprintf("%s: %d events delivered, %d delivered again, %d refused while down, %d unverified",
			e.Name, e.Delivered, e.Duplicates, e.Refused, e.Unverified))
	}
	return []string{fmt.Sprintf("week figures: %d payouts, %d PSP lookups, %d deadlines hit, %d escalations to NEEDS_REVIEW, "+
		"%d double-pay attempts refused by the PSP; %d Paystack transfers seen in otp (%d named in a page, %d by a letter of a paged class); %d alerts; "+
		"outbound endpoints: %s; %d forged money events",
		f.Payouts, f.Lookups, f.DeadlinesHit, f.Escalations, f.DoubleRefused, f.OTPSeen, f.OTPNamed, f.OTPFolded, f.Alerts,
		strings.Join(endpoints, "; "), f.Forged)}
}

// liveObjects groups the PSP's objects that are not failed by payout id.
func liveObjects(objs []pspObject) map[string][]pspObject {
	live := map[string][]pspObject{}
	for _, o := range objs {
		if o.Status != "failed" {
			live[o.PayoutID] = append(live[o.PayoutID], o)
		}
	}
	return live
}

func describe(objs []pspObject) string {
	parts := make([]string, 0, len(objs))
	for _, o := range objs {
		p := fmt.Sprintf("%s %s (%s %d %s", o.Provider, o.ID, o.Status, o.Amount, o.Currency)
		if o.IdempotencyKey != "" {
			p += ", key " + o.IdempotencyKey
		}
		if !o.CreatedAt.IsZero() {
			p += ", created " + o.CreatedAt.UTC().Format("15:04:05.000")
		}
		parts = append(parts, p+")")
	}
	return strings.Join(parts, ", ")
}

// 13. Money never given back while the PSP paid: no payout whose hold was
// released (payout_release) has a live object at the PSP (paid, or still
// pending and so about to be).
func (su *suite) checkGivenBack(ctx context.Context, _ *workload, rep *Report) error {
	objs, err := su.pspObjects(ctx)
	if err != nil {
		return err
	}
	return su.judgeGivenBack(ctx, objs, rep)
}

func (su *suite) judgeGivenBack(ctx context.Context, objs []pspObject, rep *Report) error {
	rows, err := su.pool.Query(ctx, `SELECT t.reference, p.status FROM ledger_transactions t
		JOIN payouts p ON p.id::text = t.reference WHERE t.kind = 'payout_release' ORDER BY 1`)
	if err != nil {
		return err
	}
	defer rows.Close()
	live := liveObjects(objs)
	bad, released := 0, 0
	for rows.Next() {
		var id, status string
		if err := rows.Scan(&id, &status); err != nil {
			return err
		}
		released++
		if l := live[id]; len(l) > 0 {
			rep.violation("payout %s (%s): its hold was given back while the PSP holds %s", id, status, describe(l))
			bad++
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if bad == 0 {
		rep.passed("13. no money given back while the PSP paid: none of the %d released holds has a live PSP object", released)
	}
	return nil
}

// 14. Every hold settled or released exactly once: a finished payout's hold
// ended by exactly one settle or release (never both, never neither); an
// unfinished one's by none. (The ledger's unique kind and reference already
// forbid a second hold, settle or release of one payout.)
func (su *suite) checkHoldsOnce(ctx context.Context, _ *workload, rep *Report) error {
	rows, err := su.pool.Query(ctx, `
		SELECT p.id::text, p.status,
		       count(*) FILTER (WHERE t.kind = 'payout_hold'),
		       count(*) FILTER (WHERE t.kind = 'payout_settle'),
		       count(*) FILTER (WHERE t.kind = 'payout_release')
		FROM payouts p JOIN ledger_transactions t ON t.reference = p.id::text
		GROUP BY p.id, p.status ORDER BY p.id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	bad, holds := 0, 0
	for rows.Next() {
		var id string
		var status payoutstate.Status
		var hold, settle, release int
		if err := rows.Scan(&id, &status, &hold, &settle, &release); err != nil {
			return err
		}
		if hold == 0 {
			continue
		}
		holds++
		finished := status.Closed()
		switch {
		case finished && settle+release != 1:
			rep.violation("payout %s (%s): its hold was settled %d and released %d times, want exactly once", id, status, settle, release)
		case !finished && settle+release != 0:
			rep.violation("payout %s (%s) is unfinished but its hold was settled %d and released %d times", id, status, settle, release)
		default:
			continue
		}
		bad++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if bad == 0 {
		rep.passed("14. every hold (%d) settled or released exactly once, and only for finished payouts", holds)
	}
	return nil
}

// stateSpan is a payout's stay in one state.
type stateSpan struct {
	Payout, State string
	From, Until   time.Time
}

// overdue returns the spans that outlived their state's deadline at scale,
// with when each became overdue. Time when no payout-worker ran at all
// (down: the week's worker outage) does not count: nothing in the service
// could act then, and the outage is an infrastructure alarm of its own.
// grace (wall time) is how long after a deadline the services may take to
// notice it: a stay that ends within it was answered in time.
func overdue(spans []stateSpan, deadlines []Deadline, p Profile, down [][2]time.Time, grace time.Duration) (late []stateSpan, at []time.Time) {
	limit := map[string]time.Duration{}
	for _, d := range deadlines {
		for _, s := range d.States {
			limit[string(s)] = p.Sim(d.Max)
		}
	}
	for _, sp := range spans {
		m, ok := limit[sp.State]
		if !ok || m <= 0 {
			continue
		}
		var excused time.Duration
		for _, o := range down {
			from, until := maxTime(sp.From, o[0]), minTime(sp.Until, o[1])
			if until.After(from) {
				excused += until.Sub(from)
			}
		}
		if sp.Until.Sub(sp.From)-excused > m+grace {
			late = append(late, sp)
			at = append(at, sp.From.Add(m+excused))
		}
	}
	return late, at
}

// deadlineGrace is two sweeps and a PSP reconciliation at the profile's
// scale: the time the services' own checks take to notice an overdue payout.
func deadlineGrace(p Profile) time.Duration {
	env := ScaledEnv(max(p.TimeScale, 1), ReadWorker, ReadWebhook)
	sweep, _ := time.ParseDuration(env["PAYOUT_SWEEP_INTERVAL"])
	recon, _ := time.ParseDuration(env["PSP_RECONCILE_INTERVAL"])
	return 2*sweep + recon
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// 15. Nothing unfinished past its deadline without an alarm: every stay of
// a payout in a non-final state longer than the state's deadline
// (Deadlines, at the profile's scale, less any time no worker ran) must be
// answered by an alert naming the payout or by a lookup of it at the PSP
// once overdue ("looked up at the PSP or escalated with an alert, never
// left silently").
func (su *suite) checkDeadlines(ctx context.Context, _ *workload, rep *Report) error {
	rows, err := su.pool.Query(ctx, `SELECT payout_id::text, to_status, at,
		coalesce(lead(at) OVER (PARTITION BY payout_id ORDER BY at, id), now()) FROM payout_transitions`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var spans []stateSpan
	for rows.Next() {
		var sp stateSpan
		if err := rows.Scan(&sp.Payout, &sp.State, &sp.From, &sp.Until); err != nil {
			return err
		}
		spans = append(spans, sp)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var calls []psp.CallRecord
	if su.ports.PSP != 0 {
		in := &injector{psp: su.pspURL()}
		if calls, err = in.pspCalls(); err != nil {
			return err
		}
	}
	lookedUp := map[string][]time.Time{}
	for _, c := range calls {
		if c.Method == http.MethodGet && c.PayoutID != "" {
			lookedUp[c.PayoutID] = append(lookedUp[c.PayoutID], c.Time)
		}
	}
	late, at := overdue(spans, Deadlines(), su.cfg.Profile, su.workersDown, deadlineGrace(su.cfg.Profile))
	if rep.Week != nil {
		rep.Week.DeadlinesHit = len(late)
	}
	var silent []string
	for i, sp := range late {
		if su.alerts != nil && su.alerts.Naming(sp.Payout) > 0 {
			continue
		}
		if slices.ContainsFunc(lookedUp[sp.Payout], func(t time.Time) bool { return !t.Before(at[i]) }) {
			continue
		}
		silent = append(silent, fmt.Sprintf("%s %s for %s simulated", sp.Payout, sp.State,
			simulated(sp.Until.Sub(sp.From), su.cfg.Profile).Round(time.Minute)))
	}
	sort.Strings(silent)
	if len(silent) > 0 {
		rep.violation("%d payouts outlived their state's deadline with neither an alert naming them nor a lookup at the PSP: %s",
			len(silent), strings.Join(first(silent, 10), "; "))
		return nil
	}
	rep.passed("15. no payout outlived its state's deadline silently (%d stays past a deadline, each alerted or looked up)", len(late))
	return nil
}

func simulated(wall time.Duration, p Profile) time.Duration {
	if p.TimeScale <= 1 {
		return wall
	}
	return time.Duration(float64(wall) * p.TimeScale)
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("and %d more", len(s)-n))
	}
	return s
}

// 16. Test-mode, Connect and forged-on-Kafka events moved no money: no
// ledger transaction names a forged payment.
func (su *suite) checkForged(ctx context.Context, wl *workload, rep *Report) error {
	wl.mu.Lock()
	forged := append([]forgedEvent(nil), wl.forged...)
	wl.mu.Unlock()
	if rep.Week != nil {
		rep.Week.Forged = len(forged)
	}
	bad := 0
	for _, f := range forged {
		var n int
		var ids string
		if err := su.pool.QueryRow(ctx, `SELECT count(*), coalesce(string_agg(kind || ' ' || id::text, ', '), '')
			FROM ledger_transactions WHERE position($1 in reference) > 0`, f.Payment).Scan(&n, &ids); err != nil {
			return err
		}
		if n > 0 {
			rep.violation("forged %s event %s (payment %s, user %s, %d; webhook-api answered %d) moved money: %s",
				f.Kind, f.EventID, f.Payment, f.User, f.Amount, f.Status, ids)
			bad++
		}
	}
	if bad == 0 {
		rep.passed("16. %d forged money events (test-mode against a %s key, Connect, produced straight to Kafka) moved no money",
			len(forged), "test")
	}
	return nil
}

// weekFigures gathers the figures from the stand-in, the database and the sink.
func (su *suite) weekFigures(ctx context.Context, rep *Report) error {
	f := rep.Week
	var err error
	if f.Payouts, err = su.count(ctx, `SELECT count(*) FROM payouts`); err != nil {
		return err
	}
	if f.Escalations, err = su.count(ctx, `SELECT count(DISTINCT payout_id) FROM payout_transitions WHERE to_status = 'NEEDS_REVIEW'`); err != nil {
		return err
	}
	in := &injector{psp: su.pspURL()}
	calls, err := in.pspCalls()
	if err != nil {
		return err
	}
	f.Lookups, f.DoubleRefused = callFigures(calls)
	if su.alerts != nil {
		f.Alerts = len(su.alerts.Lines())
	}
	if su.sink != nil {
		for _, r := range su.sink.snapshot() {
			f.Endpoints = append(f.Endpoints, EndpointFigures{Name: r.Name, Delivered: r.Delivered, Duplicates: r.Duplicate,
				Refused: r.Refused, Unverified: len(r.Unverified)})
		}
	}
	return nil
}

// callFigures counts, in the stand-in's call log, the reads of payouts and
// transfers (one object, or a list) and the payout creates it answered
// from what it already had.
func callFigures(calls []psp.CallRecord) (lookups, refused int) {
	for _, c := range calls {
		switch c.Method {
		case http.MethodGet:
			if strings.HasPrefix(c.Path, "/v1/payouts") || strings.HasPrefix(c.Path, "/v1/transfers") ||
				strings.HasPrefix(c.Path, "/transfer") {
				lookups++
			}
		case http.MethodPost:
			if c.PayoutID != "" && (c.Outcome == psp.OutcomeReplayed || c.Outcome == psp.OutcomeConflict) {
				refused++
			}
		}
	}
	return lookups, refused
}

// 17. A transfer waiting for an OTP is operator-visible: every Paystack
// transfer the run saw in "otp" has an alert naming its payout (a service's
// structured ALERT log line), or its payout has a dead letter of class
// psp_otp_required and that class was alerted (dlq-admin's ALERT line for
// the class: AegisDeadLetterOpen{class="psp_otp_required"} pages while any
// such letter is open, one page for the class however many letters)
// (Paystack: the transfer waits until the OTP sent to the business is
// entered; it never completes by itself).
func (su *suite) checkOTP(ctx context.Context, _ *workload, rep *Report) error {
	var silent []string
	named, folded := 0, 0
	classPaged := su.alerts != nil && su.alerts.Naming(`"alert_key":"`+otpAlertKey+`"`) > 0
	for _, o := range su.otpHeld {
		if su.alerts != nil && su.alerts.Naming(o.PayoutID) > 0 {
			named++
			continue
		}
		letters, err := su.count(ctx, `SELECT count(*) FROM dead_letters
			WHERE error_class = 'psp_otp_required' AND position(convert_to($1, 'UTF8') in payload) > 0`, o.PayoutID)
		if err != nil {
			return err
		}
		if classPaged && letters > 0 {
			folded++
			continue
		}
		silent = append(silent, fmt.Sprintf("payout %s (paystack %s; %d psp_otp_required letters; class paged: %t)",
			o.PayoutID, o.ID, letters, classPaged))
	}
	if rep.Week != nil {
		rep.Week.OTPSeen, rep.Week.OTPNamed, rep.Week.OTPFolded = len(su.otpHeld), named, folded
	}
	if len(silent) > 0 {
		rep.violation("%d Paystack transfers waited for an OTP with no alert naming them and no paged psp_otp_required letter: %s",
			len(silent), strings.Join(first(silent, 10), "; "))
		return nil
	}
	rep.passed("17. every Paystack transfer seen waiting for an OTP (%d) was alerted on: %d named in a page, %d by a psp_otp_required letter "+
		"its class's page folded", len(su.otpHeld), named, folded)
	return nil
}

// otpAlertKey is the key dlq-admin alerts psp_otp_required letters under
// (one key per topic and class: one AegisDeadLetterOpen page).
var otpAlertKey = alert.DeadLetterKey("aegis.transactions", "psp_otp_required")

// 18. Every settlement event reached both endpoints. Each processed outbox
// row on aegis.settlements with an event_id was received, its Standard
// Webhooks signature verified by the specification's library, by the
// flaky endpoint's receiver (down for six simulated hours at a time) and by
// the steady one, at least once each; duplicates (at least once) are
// counted, not faults. The only other acceptable end is a dead letter
// naming the event (it never reached the topic, or its record could not be
// taken in): the scaled retry schedule (about 27 h simulated) outlasts the
// receiver's outage, so a delivery that failed (schedule exhausted, or a
// final refusal) or is still pending after the wait is a violation, as is
// any delivery the library refused.
func (su *suite) checkSettlements(ctx context.Context, _ *workload, rep *Report) error {
	if su.sink == nil {
		return nil
	}
	if err := su.waitOutbound(ctx); err != nil {
		return err
	}
	receivers := su.sink.snapshot()
	rows, err := su.pool.Query(ctx, `SELECT o.payload->>'event_id',
		EXISTS (SELECT 1 FROM dead_letters d WHERE position(convert_to(o.payload->>'event_id', 'UTF8') in d.payload) > 0),
		coalesce((SELECT jsonb_object_agg(d.endpoint_id::text, d.state)
		          FROM outbound_messages m JOIN outbound_deliveries d ON d.message_id = m.id
		          WHERE m.event_id = o.payload->>'event_id'), '{}'::jsonb)
		FROM `+published.Rows+` o WHERE o.topic = $1 AND o.payload ? 'event_id'`, kafkax.TopicSettlements)
	if err != nil {
		return err
	}
	defer rows.Close()
	var missing []string
	total, dead := 0, 0
	seen := map[string]bool{}
	for rows.Next() {
		var id string
		var lettered bool
		var states map[string]string
		if err := rows.Scan(&id, &lettered, &states); err != nil {
			return err
		}
		if seen[id] {
			continue // one event, two outbox rows (a replayed dead letter): one event to deliver
		}
		seen[id] = true
		total++
		var short []string
		for _, r := range receivers {
			if r.Got[id] > 0 {
				continue
			}
			state := states[r.EndpointID]
			if state == "" {
				state = "no delivery"
			}
			short = append(short, r.Name+" "+state)
		}
		switch {
		case len(short) == 0:
		case lettered:
			dead++
		default:
			missing = append(missing, fmt.Sprintf("%s (%s)", id, strings.Join(short, ", ")))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	sort.Strings(missing)
	ok := true
	if len(missing) > 0 {
		ok = false
		rep.violation("%d of %d settlement events did not reach both endpoints and are in no dead letter: %s", len(missing), total,
			strings.Join(first(missing, 10), "; "))
	}
	figures := make([]string, 0, len(receivers))
	for _, r := range receivers {
		if len(r.Unverified) > 0 {
			ok = false
			rep.violation("%d deliveries to the %s endpoint failed Standard Webhooks verification: %s", len(r.Unverified), r.Name,
				strings.Join(first(r.Unverified, 10), "; "))
		}
		figures = append(figures, fmt.Sprintf("%s %d (%d duplicates, %d refused while down)", r.Name, r.Delivered, r.Duplicate, r.Refused))
	}
	if ok {
		rep.passed("18. every settlement event (%d) reached both endpoints, every delivery verified by the Standard Webhooks library "+
			"(%d only through a dead letter): %s", total, dead, strings.Join(figures, ", "))
	}
	return nil
}

// waitOutbound waits, up to su.outboundSettle, until the relay has taken
// in every processed settlement event that names an event_id (a message,
// or a dead letter naming it) and no delivery is pending. Past the wait
// the check judges what it finds.
func (su *suite) waitOutbound(ctx context.Context) error {
	deadline := time.Now().Add(su.outboundSettle)
	for {
		var waiting, pending int
		err := su.pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM `+published.Rows+` o WHERE o.topic = $1 AND o.payload ? 'event_id'
			   AND NOT EXISTS (SELECT 1 FROM outbound_messages m WHERE m.event_id = o.payload->>'event_id')
			   AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE position(convert_to(o.payload->>'event_id', 'UTF8') in d.payload) > 0)),
			(SELECT count(*) FROM outbound_deliveries WHERE state = 'pending')`, kafkax.TopicSettlements).Scan(&waiting, &pending)
		if err != nil {
			return err
		}
		if waiting == 0 && pending == 0 {
			return nil
		}
		if !time.Now().Before(deadline) {
			su.cfg.log("invariant 18: after %s, %d settlement events not taken in, %d deliveries pending", su.outboundSettle, waiting, pending)
			return nil
		}
		sleep(ctx, time.Second)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}
