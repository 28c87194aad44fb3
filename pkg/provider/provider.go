package provider

import "slices"

// Provider is a payment service provider, as stored in the provider
// columns of webhook_events, payouts and destinations.
type Provider string

const (
	Stripe   Provider = "stripe"
	Paystack Provider = "paystack"
)

// All is every provider, in the order of the schema's CHECK constraints.
func All() []Provider { return []Provider{Stripe, Paystack} }

// Valid reports whether s names a provider.
func Valid(s string) bool { return slices.Contains(All(), Provider(s)) }

// String returns the provider's name.
func (p Provider) String() string { return string(p) }
