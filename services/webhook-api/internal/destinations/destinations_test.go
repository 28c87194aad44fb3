package destinations_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/services/webhook-api/internal/destinations"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/validation"
)

// A Stripe destination is a connected account: anything else is refused as
// not one (with what to register instead), unless it is not an identifier
// at all; an acct_ that is malformed is invalid.
func TestStripeDestinationsMustBeConnectedAccounts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		reg  destinations.Registration
		kind string
		code string // RefusedError code; "" with kind "": a validation.Error
	}{
		{destinations.Registration{Provider: "Stripe", Destination: " acct_1A "}, "connected_account", ""},
		{destinations.Registration{Provider: "stripe", Destination: "acct_1A", ExternalAccount: "card_1A"}, "connected_account", ""},
		{destinations.Registration{Provider: "paystack", Destination: "RCP_1A"}, "transfer_recipient", ""},
		{destinations.Registration{Provider: "stripe", Destination: "ba_1A"}, "", destinations.CodeNotConnectedAccount},
		{destinations.Registration{Provider: "stripe", Destination: "card_1A"}, "", destinations.CodeNotConnectedAccount},
		{destinations.Registration{Provider: "stripe", Destination: "ba_1A", ExternalAccount: "ba_2A"}, "", destinations.CodeNotConnectedAccount},
		{destinations.Registration{Provider: "stripe", Destination: "RCP_1A"}, "", destinations.CodeNotConnectedAccount},
		{destinations.Registration{Provider: "stripe", Destination: "acct_"}, "", ""},
		{destinations.Registration{Provider: "stripe", Destination: "acct_1 A"}, "", ""},
		{destinations.Registration{Provider: "stripe", Destination: ""}, "", ""},
		{destinations.Registration{Provider: "paystack", Destination: "acct_1A"}, "", ""},
	} {
		reg := c.reg
		kind, err := reg.Normalize("user-1")
		require.Equal(t, c.kind, kind, "%+v", c.reg)
		if c.kind != "" {
			require.NoError(t, err, "%+v", c.reg)
			continue
		}
		var refused *destinations.RefusedError
		if c.code != "" {
			require.True(t, errors.As(err, &refused), "%+v: %v", c.reg, err)
			require.Equal(t, c.code, refused.Code)
			require.Contains(t, refused.Message, reg.Destination)
			require.Contains(t, refused.Message, destinations.ConnectMessage)
			continue
		}
		var invalid *validation.Error
		require.True(t, errors.As(err, &invalid), "%+v: %v", c.reg, err)
	}
}

// Check never registers a Stripe destination unchecked: one that is not a
// connected account is refused before any PSP is asked.
func TestCheckRefusesABareStripeDestination(t *testing.T) {
	t.Parallel()
	found, err := destinations.Checker{}.Check(context.Background(),
		destinations.Registration{Provider: "stripe", Destination: "ba_1A"})
	var refused *destinations.RefusedError
	require.True(t, errors.As(err, &refused), "%v", err)
	require.Equal(t, destinations.CodeNotConnectedAccount, refused.Code)
	require.Nil(t, found.Record)
}
