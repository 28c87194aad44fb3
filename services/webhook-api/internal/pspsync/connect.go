package pspsync

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/aegis-payments/aegis/pkg/payoutstate"
)

// compareConnected compares the payouts to a connected account's external
// account (a transfer on the platform, then a payout on the connected
// account) on both levels: those in flight or changed since since, and
// those the platform's listing showed (twoStep, read into listed).
// platform holds the platform's objects per payout.
//
//   - The transfer (the platform's objects for the payout): at most one
//     live, its amount, currency and destination (the connected account)
//     the payout's, the live one the one recorded (psp_transfer). Its
//     status says whether the money left our balance: a live transfer for
//     a payout FAILED here (its hold given back) disagrees, and so does a
//     reversed one for a payout SUCCEEDED here. A transfer recorded here
//     and not in the listing is read by its id.
//   - The connected account's payouts (its Stripe-Account listing): at most
//     one live, its amount, currency and destination (the external
//     account, on that account) the payout's, the live one the one
//     recorded (psp_reference), and its status against ours with judge's
//     rules: it is what SUCCEEDED here means. One recorded here and not
//     listed is read by its id.
//
// A payout SUCCEEDED here with no transfer, or no connected payout, at the
// PSP disagrees. A connected account whose payouts cannot be listed is
// reported and the others are still compared (its payouts on their
// transfer level only); so is a payout whose object cannot be read.
func (r *Reconciler) compareConnected(ctx context.Context, src Source, c Connect, since time.Time,
	platform map[string][]Object, listed map[string]payoutRow, twoStep []string, pr *ProviderReport,
) ([]Disagreement, error) {
	p := src.Provider()
	rows, ids, err := r.runs.connected(ctx, p, since, r.cfg.Grace, maxChecked)
	if err != nil {
		pr.errorf("%v", err)
		return nil, err
	}
	if len(ids) == maxChecked {
		pr.errorf("more than %d payouts to connected accounts in flight or changed since %s: the older ones are compared only when listed",
			maxChecked, since.Format(time.RFC3339))
	}
	for _, id := range twoStep {
		if _, ok := rows[id]; !ok {
			rows[id] = listed[id]
			ids = append(ids, id)
		}
	}
	var errs []error
	var dis []Disagreement

	// Each connected account's payouts, listed once, by our payout id.
	listedOn := map[string]bool{}
	onAccounts := map[string][]Object{}
	var others []string // payout ids on the accounts that are not in rows
	for _, id := range ids {
		account := rows[id].Destination
		if _, done := listedOn[account]; done {
			continue
		}
		objs, err := c.AccountPayouts(ctx, account, since)
		if err != nil {
			if ctx.Err() != nil {
				return dis, ctx.Err()
			}
			pr.errorf("read payouts of %s: %v", account, err)
			errs = append(errs, err)
			listedOn[account] = false
			continue
		}
		listedOn[account] = true
		pr.ObjectsChecked += len(objs)
		for _, o := range objs {
			key := o.PayoutID
			if u, err := uuid.Parse(o.PayoutID); err == nil {
				key = u.String()
			}
			if _, ours := rows[key]; !ours && len(onAccounts[key]) == 0 {
				others = append(others, key)
			}
			onAccounts[key] = append(onAccounts[key], o)
		}
	}

	// A connected payout for a payout id we do not have, or for a payout
	// that names no external account: money leaves a connected account
	// for something that is not one of its payouts.
	if len(others) > 0 {
		var valid []string
		for _, key := range others {
			if _, err := uuid.Parse(key); err == nil {
				valid = append(valid, key)
			}
		}
		found, err := r.runs.payouts(ctx, valid, r.cfg.Grace)
		if err != nil {
			pr.errorf("%v", err)
			return dis, errors.Join(append(errs, err)...)
		}
		for _, key := range others {
			group := onAccounts[key]
			row, exists := found[key]
			switch {
			case !exists:
				d, _ := judge(p, decisive(group), payoutRow{}, false)
				d.Level = LevelConnectedPayout
				dis = append(dis, d)
			case row.ExternalAccount != "":
				// One of ours the query did not return (past its bound).
				rows[key] = row
				ids = append(ids, key)
			default:
				dis = append(dis, markLevel(compareMoney(p, key, group, row.connectedLevel()), LevelConnectedPayout)...)
			}
		}
	}

	for _, id := range ids {
		row := rows[id]
		pr.ConnectedPayoutsChecked++
		td, err := r.compareTransferLevel(ctx, src, id, platform[id], row)
		dis = append(dis, td...)
		if err != nil {
			if ctx.Err() != nil {
				return dis, ctx.Err()
			}
			pr.errorf("payout %s: %v", id, err)
			errs = append(errs, err)
		}
		if !listedOn[row.Destination] {
			continue // its account's listing failed: reported above
		}
		cd, err := r.compareConnectedLevel(ctx, p, c, id, onAccounts[id], row)
		dis = append(dis, cd...)
		if err != nil {
			if ctx.Err() != nil {
				return dis, ctx.Err()
			}
			pr.errorf("payout %s: %v", id, err)
			errs = append(errs, err)
		}
	}
	return dis, errors.Join(errs...)
}

// compareTransferLevel compares a two-step payout's transfer (group: the
// platform's objects for it).
func (r *Reconciler) compareTransferLevel(ctx context.Context, src Source, id string, group []Object, row payoutRow) ([]Disagreement, error) {
	p := src.Provider()
	ours := row.transferLevel()
	if len(group) == 0 && ours.PSPReference != "" {
		o, err := src.Lookup(ctx, id, ours.PSPReference)
		switch {
		case errors.Is(err, ErrNotFound):
			return missing(p, id, ours, LevelTransfer, "the transfer "+ours.PSPReference+" recorded here does not exist at the PSP"), nil
		case err != nil:
			return nil, fmt.Errorf("look up transfer %s: %w", ours.PSPReference, err)
		}
		group = []Object{o}
	}
	if len(group) == 0 {
		return missing(p, id, ours, LevelTransfer, "no transfer to "+ours.Destination+" at the PSP"), nil
	}
	var dis []Disagreement
	if d, ok := judgeTransfer(p, id, decisive(group), ours); ok {
		dis = append(dis, d)
	}
	dis = append(dis, compareMoney(p, id, group, ours)...)
	return markLevel(dis, LevelTransfer), nil
}

// compareConnectedLevel compares a two-step payout's payout on its
// connected account (group: that account's payouts for it, and any other
// listed account's).
func (r *Reconciler) compareConnectedLevel(ctx context.Context, p string, c Connect, id string, group []Object, row payoutRow) ([]Disagreement, error) {
	ours := row.connectedLevel()
	if len(group) == 0 && ours.PSPReference != "" {
		o, err := c.LookupAccountPayout(ctx, ours.Account, ours.PSPReference)
		switch {
		case errors.Is(err, ErrNotFound):
			return missing(p, id, ours, LevelConnectedPayout,
				"the payout "+ours.PSPReference+" recorded here does not exist on "+ours.Account), nil
		case err != nil:
			return nil, fmt.Errorf("look up payout %s of %s: %w", ours.PSPReference, ours.Account, err)
		}
		group = []Object{o}
	}
	if len(group) == 0 {
		return missing(p, id, ours, LevelConnectedPayout, "no payout on "+ours.Account+" at the PSP"), nil
	}
	var dis []Disagreement
	if d, ok := judge(p, decisive(group), ours, true); ok {
		d.PayoutID = id
		dis = append(dis, d)
	}
	dis = append(dis, compareMoney(p, id, group, ours)...)
	return markLevel(dis, LevelConnectedPayout), nil
}

// missing is what a two-step payout's level without its object at the PSP
// means: for a payout SUCCEEDED here, the money did not go
// (SucceededNotPaid); for one whose object is recorded here, once it has
// settled, our record names an object the PSP does not have
// (ObjectMismatch); otherwise nothing (not made yet, or never to be).
func missing(p, id string, ours payoutRow, level, why string) []Disagreement {
	d := Disagreement{Provider: p, PayoutID: id, PSPObjectID: ours.PSPReference, PSPStatus: "not_found",
		LedgerStatus: ours.Status, Level: level}
	switch {
	case ours.Status == string(payoutstate.Succeeded):
		d.Kind, d.Detail = SucceededNotPaid, string(payoutstate.Succeeded)+" here; "+why
	case ours.PSPReference != "" && ours.Settled:
		d.Kind, d.Detail = ObjectMismatch, why+"; "+ours.Status+" here"
	default:
		return nil
	}
	return []Disagreement{d}
}

// judgeTransfer compares a two-step payout's transfer (o, its decisive
// one) with the payout: the transfer moved the money out of our balance
// unless it was reversed; whether the payout is paid is its connected
// payout's to say (compareConnectedLevel). A live transfer for a payout
// FAILED or FINALIZED here (its hold given back) and a reversed one for a
// payout SUCCEEDED here disagree, once the payout has settled (the
// transfer.reversed webhook, or the release, may be on its way).
func judgeTransfer(p, id string, o Object, ours payoutRow) (Disagreement, bool) {
	d := Disagreement{Provider: p, PayoutID: id, PSPObjectID: o.ID, PSPStatus: o.Status, LedgerStatus: ours.Status}
	if !ours.Settled {
		return d, false
	}
	switch {
	case o.Verdict == PSPPaid && payoutstate.Status(ours.Status).Unpaid():
		d.Kind = PaidNotSucceeded
		d.Detail = "the transfer to " + ours.Destination + " moved the money at the PSP; " + ours.Status + " here (its hold was given back)"
		return d, true
	case o.Verdict == PSPFailed && ours.Status == string(payoutstate.Succeeded):
		d.Kind = SucceededNotPaid
		d.Detail = string(payoutstate.Succeeded) + " here; the transfer to " + ours.Destination + " is " + o.Status + " at the PSP"
		return d, true
	}
	return d, false
}

// markLevel sets the level of a two-step payout's disagreements.
func markLevel(dis []Disagreement, level string) []Disagreement {
	for i := range dis {
		dis[i].Level = level
	}
	return dis
}
