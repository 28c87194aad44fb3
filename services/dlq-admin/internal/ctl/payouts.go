package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Payouts in review, their resolutions and the four-eyes approvals.

type payoutRow struct {
	ID               string  `json:"id"`
	UserID           string  `json:"user_id"`
	Amount           int64   `json:"amount"`
	Currency         string  `json:"currency"`
	Provider         string  `json:"provider"`
	Status           string  `json:"status"`
	PSPReference     *string `json:"psp_reference"`
	LastError        *string `json:"last_error"`
	DeadLetterID     *int64  `json:"dead_letter_id"`
	ResolutionStatus *string `json:"resolution_status"`
}

type resolutionRow struct {
	ID          string    `json:"id"`
	PayoutID    string    `json:"payout_id"`
	Outcome     string    `json:"outcome"`
	PSPObjectID string    `json:"psp_object_id"`
	RequestedBy string    `json:"requested_by"`
	Status      string    `json:"status"`
	PSPAnswer   *string   `json:"psp_answer"`
	ApprovalID  *int64    `json:"approval_id"`
	ApprovedBy  *string   `json:"approved_by"`
	CreatedAt   time.Time `json:"created_at"`
}

type approvalRow struct {
	ID             int64   `json:"id"`
	Kind           string  `json:"kind"`
	Summary        string  `json:"summary"`
	RequestedBy    string  `json:"requested_by"`
	Status         string  `json:"status"`
	DecidedBy      *string `json:"decided_by"`
	DecisionReason *string `json:"decision_reason"`
	ResultID       *string `json:"result_id"`
}

func (a *app) payoutsCmd() *cobra.Command {
	var status, cursor string
	var limit int
	var all, paid, failed bool
	var reason, evidence, otp string
	return group("payouts", "Payouts: those in review, one payout's history, resolutions and Paystack OTPs",
		a.command(leaf{
			use:     "list",
			short:   "Payouts by status, NEEDS_REVIEW first, then oldest: why each is where it is",
			example: "  aegisctl payouts list --status NEEDS_REVIEW",
			ops:     []string{"GET /v1/payouts"},
			flags: func(fs *pflag.FlagSet) {
				fs.StringVar(&status, "status", "", "one payout state, e.g. NEEDS_REVIEW (default every state)")
				fs.StringVar(&cursor, "cursor", "", "the previous page's cursor")
				fs.IntVar(&limit, "limit", 50, "page size")
				fs.BoolVar(&all, "all", false, "every page")
			},
			run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
				return e.listPayouts(ctx, status, cursor, limit, all)
			},
		}),
		a.command(leaf{
			use:   "show PAYOUT_ID",
			short: "One payout (read-only): its state, every transition and the calls to the PSP",
			ops:   []string{"GET /v1/payouts/{id}"},
			args:  cobra.ExactArgs(1),
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.showPayout(ctx, args[0])
			},
		}),
		a.command(leaf{
			use:   "resolve PAYOUT_ID",
			short: "Resolve a NEEDS_REVIEW payout as paid or failed, with the PSP object checked (operator)",
			long: `Resolve a NEEDS_REVIEW payout as --paid or --failed (operator). payout-worker
checks the evidence against the PSP's own record before anything moves:
follow it with aegisctl resolutions show ID. With REQUIRE_SECOND_APPROVER it
waits for a second operator (aegisctl approvals approve ID).`,
			example: "  aegisctl payouts resolve 9f0c… --failed --reason \"account closed\" --evidence po_1Abc",
			ops:     []string{"POST /v1/payouts/{id}/resolve"},
			args:    cobra.ExactArgs(1),
			flags: func(fs *pflag.FlagSet) {
				fs.BoolVar(&paid, "paid", false, "the PSP paid it")
				fs.BoolVar(&failed, "failed", false, "the PSP has no live object for it")
				fs.StringVar(&reason, "reason", "", "why (required)")
				fs.StringVar(&evidence, "evidence", "", "the PSP object id checked: po_…, tr_…, TRF_… (required)")
			},
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.resolvePayout(ctx, args, paid, failed, reason, evidence)
			},
		}),
		a.command(leaf{
			use:   "otp PAYOUT_ID",
			short: "Enter the OTP Paystack sent for the payout's transfer (status otp; one use, 30 minutes)",
			ops:   []string{"POST /v1/payouts/{id}/paystack-otp"},
			args:  cobra.ExactArgs(1),
			flags: func(fs *pflag.FlagSet) { fs.StringVar(&otp, "otp", "", "the code Paystack sent (required)") },
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.payoutOTP(ctx, args, otp)
			},
		}),
	)
}

func (a *app) resolutionsCmd() *cobra.Command {
	var payout string
	return group("resolutions", "Operator resolutions of payouts in review",
		a.command(leaf{
			use:   "show RESOLUTION_ID",
			short: "One resolution and its status (exit 6 when the worker refused it: the PSP disagreed)",
			ops:   []string{"GET /v1/resolutions/{id}"},
			args:  cobra.ExactArgs(1),
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.showResolution(ctx, args)
			},
		}),
		a.command(leaf{
			use:     "list",
			short:   "A payout's resolutions, newest first",
			example: "  aegisctl resolutions list --payout-id 9f0c…",
			ops:     []string{"GET /v1/payouts/{id}/resolutions"},
			flags:   func(fs *pflag.FlagSet) { fs.StringVar(&payout, "payout-id", "", "the payout (required)") },
			run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
				if payout == "" {
					return usageErrorf("resolutions list needs --payout-id")
				}
				return e.listResolutions(ctx, payout)
			},
		}),
	)
}

func (a *app) approvalsCmd() *cobra.Command {
	var status string
	var limit int
	var approveReason, rejectReason string
	return group("approvals", "Four-eyes approvals (REQUIRE_SECOND_APPROVER): list, show, approve, reject",
		a.command(leaf{
			use:   "list",
			short: "Approvals, newest first (pending by default)",
			ops:   []string{"GET /v1/approvals"},
			flags: func(fs *pflag.FlagSet) {
				fs.StringVar(&status, "status", "pending", "pending, approved, rejected, or \"\" for all")
				fs.IntVar(&limit, "limit", 0, "how many (default the API's)")
			},
			run: func(ctx context.Context, e *env, _ *cobra.Command, _ []string) error {
				return e.listApprovals(ctx, status, limit)
			},
		}),
		a.command(leaf{
			use:   "show ID",
			short: "One approval",
			ops:   []string{"GET /v1/approvals/{id}"},
			args:  cobra.ExactArgs(1),
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.showApproval(ctx, args)
			},
		}),
		a.command(leaf{
			use:   "approve ID",
			short: "Approve a pending action as a second operator (not the requester)",
			ops:   []string{"POST /v1/approvals/{id}/approve"},
			args:  cobra.ExactArgs(1),
			flags: func(fs *pflag.FlagSet) { fs.StringVar(&approveReason, "reason", "", "kept in the audit log") },
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.decideApproval(ctx, args, true, approveReason)
			},
		}),
		a.command(leaf{
			use:   "reject ID",
			short: "Reject a pending action (the requester may withdraw their own)",
			ops:   []string{"POST /v1/approvals/{id}/reject"},
			args:  cobra.ExactArgs(1),
			flags: func(fs *pflag.FlagSet) { fs.StringVar(&rejectReason, "reason", "", "why (required)") },
			run: func(ctx context.Context, e *env, _ *cobra.Command, args []string) error {
				return e.decideApproval(ctx, args, false, rejectReason)
			},
		}),
	)
}

func (e *env) listPayouts(ctx context.Context, status, cursor string, limit int, all bool) error {
	var items []payoutRow
	var raws []json.RawMessage
	for {
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if status != "" {
			q.Set("status", status)
		}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Items      []json.RawMessage `json:"items"`
			NextCursor string            `json:"next_cursor"`
		}
		if _, err := e.c.getJSON(ctx, "/v1/payouts", q, &page); err != nil {
			return err
		}
		for _, raw := range page.Items {
			var p payoutRow
			if err := json.Unmarshal(raw, &p); err != nil {
				return fmt.Errorf("decode payout: %w", err)
			}
			items, raws = append(items, p), append(raws, raw)
		}
		cursor = page.NextCursor
		if !all || cursor == "" {
			break
		}
	}
	if e.structured() {
		return e.printJSON(map[string]any{"items": raws, "next_cursor": cursor})
	}
	t := newTable(e.out, "PAYOUT", "STATUS", "USER", "AMOUNT", "PROVIDER", "PSP OBJECT", "LETTER", "RESOLUTION", "WHY")
	for _, p := range items {
		letter := "-"
		if p.DeadLetterID != nil {
			letter = strconv.FormatInt(*p.DeadLetterID, 10)
		}
		t.row(p.ID, p.Status, p.UserID, fmt.Sprintf("%d %s", p.Amount, p.Currency), p.Provider, deref(p.PSPReference),
			letter, deref(p.ResolutionStatus), clip(oneLine(deref(p.LastError)), 60))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if cursor != "" {
		fmt.Fprintf(e.errOut, "more: --cursor %s (or --all)\n", cursor)
	}
	return nil
}

func (e *env) resolvePayout(ctx context.Context, pos []string, paid, failed bool, reason, evidence string) error {
	if len(pos) != 1 {
		return usageErrorf("payouts resolve needs one payout ID")
	}
	if paid == failed {
		return usageErrorf("payouts resolve needs exactly one of --paid or --failed")
	}
	if reason == "" || evidence == "" {
		return usageErrorf("payouts resolve needs --reason and --evidence (the PSP object id you checked)")
	}
	outcome := "failed"
	if paid {
		outcome = "paid"
	}
	var r resolutionRow
	if printed, err := e.post(ctx, "/v1/payouts/"+url.PathEscape(pos[0])+"/resolve",
		map[string]string{"outcome": outcome, "reason": reason, "psp_object_id": evidence}, "resolution", &r); printed || err != nil {
		return err
	}
	if r.ApprovalID != nil && r.Status == "awaiting_approval" {
		fmt.Fprintf(e.out, "resolution %s of payout %s as %s awaits a second operator: aegisctl approvals approve %d\n",
			r.ID, r.PayoutID, r.Outcome, *r.ApprovalID)
		return nil
	}
	fmt.Fprintf(e.out, "resolution %s of payout %s as %s is %s; see it with: aegisctl resolutions show %s\n",
		r.ID, r.PayoutID, r.Outcome, r.Status, r.ID)
	return nil
}

func (e *env) showResolution(ctx context.Context, pos []string) error {
	if len(pos) != 1 {
		return usageErrorf("resolutions show needs one resolution ID")
	}
	var r resolutionRow
	raw, err := e.c.getJSON(ctx, "/v1/resolutions/"+url.PathEscape(pos[0]), nil, &r)
	if err != nil {
		return err
	}
	if e.structured() {
		if err := e.printRaw(raw); err != nil {
			return err
		}
		if r.Status == "refused" {
			return errUnhealthy
		}
		return nil
	}
	t := newTable(e.out)
	t.row("resolution", r.ID)
	t.row("payout", r.PayoutID)
	t.row("outcome", r.Outcome)
	t.row("evidence", r.PSPObjectID)
	t.row("by", r.RequestedBy)
	t.row("status", r.Status)
	t.row("psp answer", deref(r.PSPAnswer))
	if err := t.flush(); err != nil {
		return err
	}
	if r.Status == "refused" {
		return errUnhealthy
	}
	return nil
}

func (e *env) listApprovals(ctx context.Context, status string, limit int) error {
	var l struct {
		Items []approvalRow `json:"items"`
	}
	q := url.Values{"status": {status}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	raw, err := e.c.getJSON(ctx, "/v1/approvals", q, &l)
	if err != nil {
		return err
	}
	if e.structured() {
		return e.printRaw(raw)
	}
	t := newTable(e.out, "ID", "KIND", "STATUS", "REQUESTED BY", "DECIDED BY", "RESULT", "WHAT")
	for _, a := range l.Items {
		t.row(strconv.FormatInt(a.ID, 10), a.Kind, a.Status, a.RequestedBy, deref(a.DecidedBy), deref(a.ResultID), clip(a.Summary, 80))
	}
	return t.flush()
}

func (e *env) decideApproval(ctx context.Context, pos []string, approve bool, reason string) error {
	name, verb := "approvals reject", "reject"
	if approve {
		name, verb = "approvals approve", "approve"
	}
	id, err := oneID(name, pos)
	if err != nil {
		return err
	}
	if !approve && reason == "" {
		return usageErrorf("approvals reject needs --reason")
	}
	var body any
	if reason != "" {
		body = map[string]string{"reason": reason}
	}
	var a approvalRow
	if printed, err := e.post(ctx, fmt.Sprintf("/v1/approvals/%d/%s", id, verb), body, "approval", &a); printed || err != nil {
		return err
	}
	fmt.Fprintf(e.out, "approval %d (%s) %s by %s", a.ID, a.Kind, a.Status, deref(a.DecidedBy))
	if a.ResultID != nil {
		fmt.Fprintf(e.out, ": %s", *a.ResultID)
	}
	fmt.Fprintln(e.out)
	return nil
}

// payoutOTP enters the OTP of a Paystack transfer waiting for one.
func (e *env) payoutOTP(ctx context.Context, pos []string, code string) error {
	if len(pos) != 1 || code == "" {
		return usageErrorf("payouts otp needs one payout ID and --otp (the code Paystack sent)")
	}
	var r struct {
		PayoutID     string `json:"payout_id"`
		TransferCode string `json:"transfer_code"`
		Status       string `json:"status"`
		Message      string `json:"message"`
	}
	if printed, err := e.post(ctx, "/v1/payouts/"+url.PathEscape(pos[0])+"/paystack-otp", map[string]string{"otp": code},
		"OTP answer", &r); printed || err != nil {
		return err
	}
	fmt.Fprintf(e.out, "Paystack took the OTP for transfer %s of payout %s: %s (%s); its events settle the payout\n",
		r.TransferCode, r.PayoutID, r.Status, r.Message)
	return nil
}

func (e *env) showApproval(ctx context.Context, pos []string) error {
	id, err := oneID("approvals show", pos)
	if err != nil {
		return err
	}
	return send(ctx, e, "GET", fmt.Sprintf("/v1/approvals/%d", id), nil, nil, func(a approvalRow) error {
		t := newTable(e.out)
		t.row("approval", strconv.FormatInt(a.ID, 10))
		t.row("kind", a.Kind)
		t.row("what", a.Summary)
		t.row("requested by", a.RequestedBy)
		t.row("status", a.Status)
		t.row("decided by", first(deref(a.DecidedBy), "-"))
		t.row("decision reason", first(deref(a.DecisionReason), "-"))
		t.row("result", first(deref(a.ResultID), "-"))
		return t.flush()
	})
}

func (e *env) listResolutions(ctx context.Context, payoutID string) error {
	return send(ctx, e, "GET", "/v1/payouts/"+url.PathEscape(payoutID)+"/resolutions", nil, nil, func(l struct {
		Items []resolutionRow `json:"items"`
	}) error {
		t := newTable(e.out, "RESOLUTION", "OUTCOME", "STATUS", "BY", "APPROVED BY", "EVIDENCE", "CREATED", "PSP ANSWER")
		for _, r := range l.Items {
			t.row(r.ID, r.Outcome, r.Status, r.RequestedBy, first(deref(r.ApprovedBy), "-"), r.PSPObjectID,
				r.CreatedAt.UTC().Format(time.RFC3339), clip(oneLine(deref(r.PSPAnswer)), 60))
		}
		return t.flush()
	})
}

// payoutDetail is what payouts show prints of a payout.
type payoutDetail struct {
	payoutRow
	Destination   string    `json:"destination"`
	Attempts      int       `json:"attempts"`
	PSPStatus     *string   `json:"psp_status"`
	ErrorClass    *string   `json:"error_class"`
	CorrelationID string    `json:"correlation_id"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	Transitions   []struct {
		From       *string   `json:"from"`
		To         string    `json:"to"`
		Attempt    int       `json:"attempt"`
		Error      *string   `json:"error"`
		ErrorClass *string   `json:"error_class"`
		At         time.Time `json:"at"`
	} `json:"transitions"`
	PSPAttempts []struct {
		Attempt      int       `json:"attempt"`
		Kind         string    `json:"kind"`
		Outcome      string    `json:"outcome"`
		PSPReference *string   `json:"psp_reference"`
		Error        *string   `json:"error"`
		At           time.Time `json:"at"`
	} `json:"psp_attempts"`
}

func (e *env) showPayout(ctx context.Context, id string) error {
	return send(ctx, e, "GET", "/v1/payouts/"+url.PathEscape(id), nil, nil, func(p payoutDetail) error {
		t := newTable(e.out)
		t.row("payout", p.ID)
		t.row("status", p.Status)
		t.row("user", p.UserID)
		t.row("amount", fmt.Sprintf("%d %s", p.Amount, p.Currency))
		t.row("provider", p.Provider)
		t.row("destination", p.Destination)
		t.row("psp reference", first(deref(p.PSPReference), "-"))
		t.row("psp status", first(deref(p.PSPStatus), "-"))
		t.row("attempts", strconv.Itoa(p.Attempts))
		t.row("last error", first(oneLine(deref(p.LastError)), "-"))
		t.row("error class", first(deref(p.ErrorClass), "-"))
		t.row("correlation id", p.CorrelationID)
		t.row("created, updated", p.CreatedAt.UTC().Format(time.RFC3339)+", "+p.UpdatedAt.UTC().Format(time.RFC3339))
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintln(e.out, "transitions:")
		t = newTable(e.out, "AT", "FROM", "TO", "ATTEMPT", "CLASS", "ERROR")
		for _, tr := range p.Transitions {
			t.row(tr.At.UTC().Format(time.RFC3339), first(deref(tr.From), "-"), tr.To, strconv.Itoa(tr.Attempt),
				first(deref(tr.ErrorClass), "-"), clip(oneLine(deref(tr.Error)), 80))
		}
		if err := t.flush(); err != nil {
			return err
		}
		fmt.Fprintln(e.out, "calls to the PSP:")
		t = newTable(e.out, "AT", "ATTEMPT", "KIND", "OUTCOME", "PSP REFERENCE", "ERROR")
		for _, c := range p.PSPAttempts {
			t.row(c.At.UTC().Format(time.RFC3339), strconv.Itoa(c.Attempt), c.Kind, c.Outcome, first(deref(c.PSPReference), "-"),
				clip(oneLine(deref(c.Error)), 80))
		}
		return t.flush()
	})
}
