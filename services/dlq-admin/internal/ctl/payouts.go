package ctl

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"strconv"
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
	ID          string  `json:"id"`
	PayoutID    string  `json:"payout_id"`
	Outcome     string  `json:"outcome"`
	PSPObjectID string  `json:"psp_object_id"`
	RequestedBy string  `json:"requested_by"`
	Status      string  `json:"status"`
	PSPAnswer   *string `json:"psp_answer"`
	ApprovalID  *int64  `json:"approval_id"`
}

type approvalRow struct {
	ID          int64   `json:"id"`
	Kind        string  `json:"kind"`
	Summary     string  `json:"summary"`
	RequestedBy string  `json:"requested_by"`
	Status      string  `json:"status"`
	DecidedBy   *string `json:"decided_by"`
	ResultID    *string `json:"result_id"`
}

func (e *env) listPayouts(ctx context.Context, args []string) error {
	var status, cursor string
	var limit int
	var all bool
	pos, err := flags("payouts list", args, func(fs *flag.FlagSet) {
		fs.StringVar(&status, "status", "", "")
		fs.StringVar(&cursor, "cursor", "", "")
		fs.IntVar(&limit, "limit", 50, "")
		fs.BoolVar(&all, "all", false, "")
	})
	if err != nil {
		return err
	}
	if err := noArgs("payouts list", pos); err != nil {
		return err
	}
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
	if e.json {
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

func (e *env) resolvePayout(ctx context.Context, args []string) error {
	var paid, failed bool
	var reason, evidence string
	pos, err := flags("payouts resolve", args, func(fs *flag.FlagSet) {
		fs.BoolVar(&paid, "paid", false, "")
		fs.BoolVar(&failed, "failed", false, "")
		fs.StringVar(&reason, "reason", "", "")
		fs.StringVar(&evidence, "evidence", "", "")
	})
	if err != nil {
		return err
	}
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

func (e *env) showResolution(ctx context.Context, args []string) error {
	pos, err := flags("resolutions show", args, nil)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageErrorf("resolutions show needs one resolution ID")
	}
	var r resolutionRow
	raw, err := e.c.getJSON(ctx, "/v1/resolutions/"+url.PathEscape(pos[0]), nil, &r)
	if err != nil {
		return err
	}
	if e.json {
		return e.printRaw(raw)
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

func (e *env) listApprovals(ctx context.Context, args []string) error {
	status := "pending"
	pos, err := flags("approvals list", args, func(fs *flag.FlagSet) { fs.StringVar(&status, "status", "pending", "") })
	if err != nil {
		return err
	}
	if err := noArgs("approvals list", pos); err != nil {
		return err
	}
	var l struct {
		Items []approvalRow `json:"items"`
	}
	raw, err := e.c.getJSON(ctx, "/v1/approvals", url.Values{"status": {status}}, &l)
	if err != nil {
		return err
	}
	if e.json {
		return e.printRaw(raw)
	}
	t := newTable(e.out, "ID", "KIND", "STATUS", "REQUESTED BY", "DECIDED BY", "RESULT", "WHAT")
	for _, a := range l.Items {
		t.row(strconv.FormatInt(a.ID, 10), a.Kind, a.Status, a.RequestedBy, deref(a.DecidedBy), deref(a.ResultID), clip(a.Summary, 80))
	}
	return t.flush()
}

func (e *env) decideApproval(ctx context.Context, args []string, approve bool) error {
	name, verb := "approvals reject", "reject"
	if approve {
		name, verb = "approvals approve", "approve"
	}
	var reason string
	pos, err := flags(name, args, func(fs *flag.FlagSet) { fs.StringVar(&reason, "reason", "", "") })
	if err != nil {
		return err
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
func (e *env) payoutOTP(ctx context.Context, args []string) error {
	var code string
	pos, err := flags("payouts otp", args, func(fs *flag.FlagSet) {
		fs.StringVar(&code, "otp", "", "")
	})
	if err != nil {
		return err
	}
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
