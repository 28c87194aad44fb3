package psp

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Balances: Stripe's platform and each connected account, and Paystack's
// integration, hold an available balance per currency (minor units).
//
//   - A Stripe transfer moves its amount from the balance it is made from
//     (the platform's; a connected account's under Stripe-Account) to its
//     destination's; a reversal moves it back.
//   - A payout on a connected account moves its amount from the account's
//     balance to its bank; if it fails, Stripe returns the amount.
//   - A Paystack transfer leaves the integration's balance when it is
//     made and comes back if it fails.
//   - A payment adds its amount less the PSP's fee (fees.go) to the
//     Stripe platform's or the Paystack integration's balance; a refund
//     takes its amount back (a failed Stripe refund gives it back).
//   - Every movement of a Stripe balance is posted as a balance
//     transaction (balancetxn.go, postStripe), which moves it.
//   - Platform payouts (no Stripe-Account) are paid from an unlimited
//     balance, as before balances were modelled: they neither check nor
//     change the platform's.
//
// The platform and the integration start with Config.Balances (or
// DefaultBalance in each default currency); connected accounts start empty.

// DefaultBalance is the starting balance, in minor units, of each default
// currency of the Stripe platform and of the Paystack integration.
const DefaultBalance int64 = 1_000_000_000_000

// Default currencies of the starting balances (Config.Balances unset).
var (
	defaultStripeCurrencies   = []string{"usd", "eur", "gbp", "ngn"}
	defaultPaystackCurrencies = []string{"ngn", "usd", "ghs", "zar", "kes"}
)

// balanceKey names one balance: a provider's platform (account "") or a
// Stripe connected account, in one lower-case currency.
type balanceKey struct {
	provider Provider
	account  string
	currency string
}

// seedBalances gives the Stripe platform and the Paystack integration
// their starting balances.
func seedBalances(st *state, cfg Config) {
	seed := func(p Provider, defaults []string) {
		if cfg.Balances != nil {
			for cur, n := range cfg.Balances {
				st.balances[balanceKey{p, "", strings.ToLower(cur)}] = n
			}
			return
		}
		for _, cur := range defaults {
			st.balances[balanceKey{p, "", cur}] = DefaultBalance
		}
	}
	seed(ProviderStripe, defaultStripeCurrencies)
	seed(ProviderPaystack, defaultPaystackCurrencies)
}

// balance is the available amount of one balance.
func (st *state) balance(p Provider, account, currency string) int64 {
	return st.balances[balanceKey{p, account, strings.ToLower(currency)}]
}

// credit adds amount to a balance.
func (st *state) credit(p Provider, account, currency string, amount int64) {
	st.balances[balanceKey{p, account, strings.ToLower(currency)}] += amount
}

// debit takes amount from a balance if it holds that much (or if force,
// as when Stripe itself takes money back), and reports whether it did.
func (st *state) debit(p Provider, account, currency string, amount int64, force bool) bool {
	k := balanceKey{p, account, strings.ToLower(currency)}
	if !force && st.balances[k] < amount {
		return false
	}
	st.balances[k] -= amount
	return true
}

// currencies lists the currencies one account has a balance in, sorted.
func (st *state) currencies(p Provider, account string) []string {
	var out []string
	for k := range st.balances {
		if k.provider == p && k.account == account {
			out = append(out, k.currency)
		}
	}
	slices.Sort(out)
	return out
}

// parseBalances reads PSP_BALANCES: "usd=1000000,ngn=500" (minor units).
func parseBalances(v string) (map[string]int64, error) {
	out := map[string]int64{}
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		cur, raw, ok := strings.Cut(part, "=")
		cur = strings.ToLower(strings.TrimSpace(cur))
		n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("want currency=amount, got %q", part)
		}
		out[cur] = n
	}
	return out, validateBalances(out)
}

func validateBalances(b map[string]int64) error {
	for cur, n := range b {
		if len(cur) != 3 || strings.Trim(strings.ToLower(cur), "abcdefghijklmnopqrstuvwxyz") != "" {
			return fmt.Errorf("currency %q: want a three-letter code", cur)
		}
		if n < 0 {
			return fmt.Errorf("%s: balance must not be negative, got %d", cur, n)
		}
	}
	return nil
}

// stripeBalanceAmount is one entry of a Stripe balance's available or
// pending list.
type stripeBalanceAmount struct {
	Amount      int64            `json:"amount"`
	Currency    string           `json:"currency"`
	SourceTypes map[string]int64 `json:"source_types,omitempty"`
}

// stripeBalance is Stripe's balance object (GET /v1/balance).
type stripeBalance struct {
	Object          string                `json:"object"`
	Available       []stripeBalanceAmount `json:"available"`
	ConnectReserved []stripeBalanceAmount `json:"connect_reserved"`
	Livemode        bool                  `json:"livemode"`
	Pending         []stripeBalanceAmount `json:"pending"`
}

// stripeBalanceOf renders an account's balance ("" the platform's); an
// account with no balance yet shows its default currency at zero.
func stripeBalanceOf(st *state, account string) stripeBalance {
	b := stripeBalance{Object: "balance", Available: []stripeBalanceAmount{}, ConnectReserved: []stripeBalanceAmount{},
		Pending: []stripeBalanceAmount{}}
	curs := st.currencies(ProviderStripe, account)
	if len(curs) == 0 {
		curs = []string{connectDefaultCurrency}
	}
	for _, cur := range curs {
		n := st.balance(ProviderStripe, account, cur)
		b.Available = append(b.Available, stripeBalanceAmount{Amount: n, Currency: cur, SourceTypes: map[string]int64{"card": n}})
		b.Pending = append(b.Pending, stripeBalanceAmount{Amount: 0, Currency: cur, SourceTypes: map[string]int64{"card": 0}})
		b.ConnectReserved = append(b.ConnectReserved, stripeBalanceAmount{Amount: 0, Currency: cur})
	}
	return b
}

// handleStripeBalance serves GET /v1/balance: the platform's, or with
// Stripe-Account the connected account's.
func (s *Server) handleStripeBalance(w http.ResponseWriter, r *http.Request) {
	_, call, account, ok := s.beginStripeRead(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	body := mustJSON(stripeBalanceOf(s.st, account))
	s.mu.Unlock()
	s.respond(w, call, response{status: http.StatusOK, body: body, outcome: OutcomeOK})
}

// paystackBalance is one entry of Paystack's GET /balance.
type paystackBalance struct {
	Currency string `json:"currency"`
	Balance  int64  `json:"balance"`
}

// handlePaystackBalance serves GET /balance: the integration's balance per
// currency (not scoped per secret key).
func (s *Server) handlePaystackBalance(w http.ResponseWriter, r *http.Request) {
	_, call := s.beginCall(r, ProviderPaystack)
	if _, errBody := paystackAPIKey(r); errBody != nil {
		s.respond(w, call, response{status: http.StatusUnauthorized, body: errBody, outcome: OutcomeUnauthorized})
		return
	}
	s.sleep(r.Context(), s.latency(ProviderPaystack))
	s.mu.Lock()
	data := []paystackBalance{}
	for _, cur := range s.st.currencies(ProviderPaystack, "") {
		data = append(data, paystackBalance{Currency: strings.ToUpper(cur), Balance: s.st.balance(ProviderPaystack, "", cur)})
	}
	s.mu.Unlock()
	s.respond(w, call, response{status: http.StatusOK, body: paystackOK("Balances retrieved", data), outcome: OutcomeOK})
}
