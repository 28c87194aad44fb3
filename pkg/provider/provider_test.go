package provider_test

import (
	"slices"
	"testing"

	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/pkg/provider"
)

// The Go list and the schema's CHECK constraints name the same providers.
func TestAllMatchesTheSchema(t *testing.T) {
	tx := pgtest.Tx(t)
	var want []string
	for _, p := range provider.All() {
		want = append(want, string(p))
	}
	slices.Sort(want)
	for _, table := range []string{"webhook_events", "payouts", "destinations"} {
		if got := pgtest.CheckValues(t, tx, table, "provider"); !slices.Equal(got, want) {
			t.Errorf("%s.provider CHECK allows %q, provider.All() is %q", table, got, want)
		}
	}
}

func TestValid(t *testing.T) {
	for _, p := range provider.All() {
		if !provider.Valid(string(p)) {
			t.Errorf("Valid(%q) = false", p)
		}
	}
	for _, s := range []string{"", "Stripe", "paypal", " stripe"} {
		if provider.Valid(s) {
			t.Errorf("Valid(%q) = true", s)
		}
	}
}
