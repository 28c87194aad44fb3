package pspsync

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stripe/stripe-go/v76"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/payoutstate"
	"github.com/aegis-payments/aegis/pkg/provider"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/pspsync/sqlcdb"
)

// BalanceMismatch: the difference between what the PSP holds for us (its
// balance) and what the ledger says it holds (the PSP clearing account)
// moved since the previous run by more than the tolerance and more than
// what was in flight in either direction explains.
const BalanceMismatch = "balance_mismatch"

// DefaultBalanceTolerance is the unexplained move of the balance
// difference, in a currency's minor units, that is not a disagreement
// (Config.BalanceTolerance zero takes it): the PSP's balance and the
// ledger are read a moment apart, and a payment or payout between the two
// reads moves one and not the other.
const DefaultBalanceTolerance = 100

// Balancer is a PSP whose balance can be read: per currency (lower case),
// what it holds for us now in minor units. Stripe: the platform's
// available plus pending (GET /v1/balance); Paystack: GET /balance.
type Balancer interface {
	Balance(ctx context.Context) (map[string]int64, error)
}

// Balance reads the platform's balance: available plus pending per
// currency (pending is ours, only not yet available).
func (s *Stripe) Balance(ctx context.Context) (map[string]int64, error) {
	b, err := s.api.Balance(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("stripe balance: %w", err)
	}
	out := map[string]int64{}
	for _, list := range [][]*stripe.Amount{b.Available, b.Pending} {
		for _, a := range list {
			out[strings.ToLower(string(a.Currency))] += a.Amount
		}
	}
	return out, nil
}

// Balance reads the integration's balance per currency (GET /balance).
func (p *Paystack) Balance(ctx context.Context) (map[string]int64, error) {
	ans, err := p.api.Do(ctx, http.MethodGet, "/balance", nil, nil, "")
	if err != nil {
		return nil, fmt.Errorf("paystack balance: %w", err)
	}
	if err := ans.Err("/balance"); err != nil {
		return nil, err
	}
	var entries []struct {
		Currency string `json:"currency"`
		Balance  int64  `json:"balance"`
	}
	if err := json.Unmarshal(ans.Data, &entries); err != nil {
		return nil, fmt.Errorf("paystack balance: %w", err)
	}
	out := map[string]int64{}
	for _, e := range entries {
		out[strings.ToLower(e.Currency)] += e.Balance
	}
	return out, nil
}

// BalanceCheck is one currency's comparison of the PSP's balance with the
// PSP clearing account, stored in the run's report (the next run's
// baseline).
type BalanceCheck struct {
	Currency string `json:"currency"`
	// PSP is the PSP's balance; Ledger what the clearing account says the
	// PSP holds (minus its balance); Difference PSP - Ledger: the money at
	// the PSP Aegis never saw (the platform's opening balance, its other
	// business) plus what is in flight.
	PSP        int64 `json:"psp_balance"`
	Ledger     int64 `json:"ledger_balance"`
	Difference int64 `json:"difference"`
	// PayoutsHeld: payouts held and not final (the PSP may have paid them
	// out while the clearing account has not moved yet: the difference may
	// be lower by up to their sum). CreditsNotPosted: payments stored and
	// not credited yet (the PSP holds them, the clearing account not yet:
	// it may be higher by up to their sum). The first MaxListed of each.
	// FeesNotCollected: Stripe credits posted since payout-worker's fee
	// collector last read Stripe's fees (their amounts, an upper bound of
	// their fees): the PSP kept the fee, the ledger does not show it yet, so
	// the difference may be lower by up to it. 0 for a PSP whose fees are
	// posted with the credit (Paystack).
	FeesNotCollected     int64    `json:"fees_not_collected,omitempty"`
	PayoutsHeld          int64    `json:"payouts_held"`
	PayoutsHeldIDs       []string `json:"payouts_held_ids,omitempty"`
	CreditsNotPosted     int64    `json:"credits_not_posted"`
	CreditsNotPostedRefs []string `json:"credits_not_posted_refs,omitempty"`
	// SettledLow..SettledHigh is where the settled difference (the money
	// Aegis never saw) lies as every run since the baseline narrowed it;
	// the next run's baseline.
	SettledLow  int64 `json:"settled_low"`
	SettledHigh int64 `json:"settled_high"`
	// Baseline: no earlier run compared this currency (or the last one
	// disagreed): this one sets where the settled difference lies.
	Baseline bool `json:"baseline,omitempty"`
	// Unexplained is how far the settled difference moved beyond the
	// tolerance (0 when it agrees).
	Unexplained int64 `json:"unexplained,omitempty"`
}

// creditTypes are the payment events the ledger credits.
func creditTypes() []string {
	return []string{string(event.StripePaymentIntentSucceeded), string(event.StripeChargeSucceeded),
		string(event.PaystackChargeSuccess)}
}

// balances compares the PSP's balance with its clearing account per
// currency. The PSP's balance also holds money Aegis never saw (the
// platform's opening balance, its other business), so the difference is
// not compared with zero but with the previous run's: once the in-flight
// items are allowed for in either direction, the settled difference must
// stay within the tolerance of where the earlier runs put it. A move
// beyond it is a disagreement, and the new difference is the baseline
// from then on (a deposit made outside Aegis pages once, not on every
// run).
func (r *Reconciler) balances(ctx context.Context, runID int64, src Source, since time.Time) ([]BalanceCheck, []Disagreement, error) {
	b, ok := src.(Balancer)
	if !ok {
		return nil, nil, nil
	}
	p := src.Provider()
	psp, err := b.Balance(ctx)
	if err != nil {
		return nil, nil, err
	}
	ledger, held, credits, fees, prev, err := r.runs.balanceInputs(ctx, p, runID, since)
	if err != nil {
		return nil, nil, err
	}
	tol := r.cfg.BalanceTolerance
	if tol == 0 {
		tol = DefaultBalanceTolerance
	}
	currencies := map[string]bool{}
	for c := range psp {
		currencies[c] = true
	}
	for c := range ledger {
		currencies[c] = true
	}
	var checks []BalanceCheck
	var dis []Disagreement
	for c := range currencies {
		bc := BalanceCheck{Currency: c, PSP: psp[c], Ledger: -ledger[c]}
		bc.Difference = bc.PSP - bc.Ledger
		bc.PayoutsHeld, bc.PayoutsHeldIDs = held[c].Amount, held[c].IDs
		bc.CreditsNotPosted, bc.CreditsNotPostedRefs = credits[c].Amount, credits[c].Refs
		bc.FeesNotCollected = fees[c]
		low, high := bc.Difference-bc.CreditsNotPosted, bc.Difference+bc.PayoutsHeld+bc.FeesNotCollected
		before, seen := prev[c]
		switch {
		case !seen:
			bc.SettledLow, bc.SettledHigh, bc.Baseline = low, high, true
		case low > before.SettledHigh+tol:
			bc.Unexplained = low - before.SettledHigh
		case high < before.SettledLow-tol:
			bc.Unexplained = high - before.SettledLow
		default:
			bc.SettledLow, bc.SettledHigh = max(low, before.SettledLow), min(high, before.SettledHigh)
			if bc.SettledLow > bc.SettledHigh { // apart by less than the tolerance
				bc.SettledLow, bc.SettledHigh = before.SettledLow, before.SettledHigh
			}
		}
		if bc.Unexplained != 0 {
			bc.SettledLow, bc.SettledHigh = low, high
			dis = append(dis, Disagreement{Provider: p, Kind: BalanceMismatch, PSPObjectID: "balance:" + c,
				PSPStatus: fmt.Sprintf("%d", bc.PSP), LedgerStatus: fmt.Sprintf("%d", bc.Ledger),
				Detail: fmt.Sprintf("%s: the PSP holds %d, the clearing account says %d: the difference %d moved by %d "+
					"unexplained since run %d (settled %d..%d then; in flight now: payouts held %d %v, credits not posted %d %v, "+
					"credits whose fee is not collected yet %d; tolerance %d)",
					c, bc.PSP, bc.Ledger, bc.Difference, bc.Unexplained, before.run, before.SettledLow, before.SettledHigh,
					bc.PayoutsHeld, bc.PayoutsHeldIDs, bc.CreditsNotPosted, bc.CreditsNotPostedRefs, bc.FeesNotCollected, tol)})
		}
		checks = append(checks, bc)
	}
	sort.Slice(checks, func(i, j int) bool { return checks[i].Currency < checks[j].Currency })
	sort.Slice(dis, func(i, j int) bool { return dis[i].PSPObjectID < dis[j].PSPObjectID })
	return checks, dis, nil
}

type heldOrPending struct {
	Amount int64
	IDs    []string
	Refs   []string
}

type previousCheck struct {
	BalanceCheck
	run int64
}

// balanceInputs reads the ledger's side of the balance comparison: the
// clearing account per currency, the payouts held and not final, the
// credits not posted since since, the credits whose fee is not collected
// yet, and the previous run's comparison.
func (r *Runs) balanceInputs(ctx context.Context, provider string, runID int64, since time.Time) (
	ledger map[string]int64, held, credits map[string]heldOrPending, fees map[string]int64,
	prev map[string]previousCheck, err error,
) {
	ledger, fees, err = r.clearing(ctx, provider)
	if err != nil {
		return nil, nil, nil, nil, nil, err
	}
	hs, err := r.q.PayoutsHeld(ctx, sqlcdb.PayoutsHeldParams{Provider: provider, MaxIds: MaxListed,
		InFlight: payoutstate.Names(payoutstate.Status.InFlight)})
	if err != nil {
		return nil, nil, nil, nil, nil, fmt.Errorf("read payouts held: %w", err)
	}
	held = map[string]heldOrPending{}
	for _, h := range hs {
		held[h.Currency] = heldOrPending{Amount: h.Amount, IDs: h.IDs}
	}
	cs, err := r.q.CreditsNotPosted(ctx, sqlcdb.CreditsNotPostedParams{Provider: provider, MaxIds: MaxListed,
		Types: creditTypes(), Since: since})
	if err != nil {
		return nil, nil, nil, nil, nil, fmt.Errorf("read credits not posted: %w", err)
	}
	credits = map[string]heldOrPending{}
	for _, c := range cs {
		credits[c.Currency] = heldOrPending{Amount: c.Amount, Refs: c.Refs}
	}
	prev = map[string]previousCheck{}
	last, err := r.q.LastBalance(ctx, sqlcdb.LastBalanceParams{Provider: provider, RunID: runID})
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger, held, credits, fees, prev, nil
	}
	if err != nil {
		return nil, nil, nil, nil, nil, fmt.Errorf("read the previous balance comparison: %w", err)
	}
	var before []BalanceCheck
	if err := json.Unmarshal(last.Balance, &before); err != nil {
		return nil, nil, nil, nil, nil, fmt.Errorf("decode the previous balance comparison: %w", err)
	}
	for _, b := range before {
		prev[b.Currency] = previousCheck{BalanceCheck: b, run: last.ID}
	}
	return ledger, held, credits, fees, prev, nil
}

// clearing reads the provider's clearing account per currency and, for a
// PSP whose fees the ledger posts only when payout-worker's collector reads
// them (Stripe), the credits posted since it last did.
func (r *Runs) clearing(ctx context.Context, psp string) (ledger, fees map[string]int64, err error) {
	owner := "psp_clearing:" + psp
	rows, err := r.q.ClearingBalances(ctx, owner)
	if err != nil {
		return nil, nil, fmt.Errorf("read the psp clearing account: %w", err)
	}
	ledger = map[string]int64{}
	for _, row := range rows {
		ledger[row.Currency] = row.Balance
	}
	fees = map[string]int64{}
	if psp != string(provider.Stripe) {
		return ledger, fees, nil
	}
	uncollected, err := r.q.FeesNotCollected(ctx, sqlcdb.FeesNotCollectedParams{Owner: owner, Provider: psp})
	if err != nil {
		return nil, nil, fmt.Errorf("read the credits whose fee is not collected yet: %w", err)
	}
	for _, u := range uncollected {
		fees[u.Currency] = u.Amount
	}
	return ledger, fees, nil
}
