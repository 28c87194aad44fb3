package origin_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/origin"
)

func TestForeign(t *testing.T) {
	live, test := true, false
	for _, c := range []struct {
		name    string
		e       event.PSPEvent
		liveKey bool
		foreign string
	}{
		{"live event, live key", event.PSPEvent{Provider: "stripe", Livemode: &live}, true, ""},
		{"test event, test key", event.PSPEvent{Provider: "stripe", Livemode: &test}, false, ""},
		{"test event, live key", event.PSPEvent{Provider: "stripe", Livemode: &test}, true, "livemode false, our key's true"},
		{"live event, test key", event.PSPEvent{Provider: "stripe", Livemode: &live}, false, "livemode true, our key's false"},
		{"no livemode, live key", event.PSPEvent{Provider: "stripe"}, true, "no livemode, our key is live"},
		{"no livemode, test key", event.PSPEvent{Provider: "stripe"}, false, ""},
		{"connected account", event.PSPEvent{Provider: "stripe", Livemode: &live, Account: "acct_1"}, true, `sent for connected account "acct_1"`},
		{"paystack has no such flags", event.PSPEvent{Provider: "paystack", Account: "x", Livemode: &test}, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.foreign, origin.Foreign(&c.e, c.liveKey))
		})
	}
}

// A payout paid out on a connected account takes that account's events,
// and no other account's, in our key's mode only.
func TestForeignForTheAccountAPayoutPaysOutOn(t *testing.T) {
	live, test := true, false
	mine := event.PSPEvent{Provider: "stripe", Livemode: &live, Account: "acct_1"}
	require.Empty(t, origin.ForeignFor(&mine, true, "acct_1"))
	require.Equal(t, `sent for connected account "acct_1"`, origin.ForeignFor(&mine, true, "acct_2"))
	require.Equal(t, `sent for connected account "acct_1"`, origin.ForeignFor(&mine, true, ""))
	testMode := event.PSPEvent{Provider: "stripe", Livemode: &test, Account: "acct_1"}
	require.Equal(t, "livemode false, our key's true", origin.ForeignFor(&testMode, true, "acct_1"))
	platform := event.PSPEvent{Provider: "stripe", Livemode: &live}
	require.Empty(t, origin.ForeignFor(&platform, true, "acct_1"), "the payout's transfer events are our own account's")
}

// BenchmarkForeign is the check's cost on the credit path for an event
// that is ours (the common case).
func BenchmarkForeign(b *testing.B) {
	live := true
	e := event.PSPEvent{Provider: "stripe", EventID: "evt_1", Action: event.ActionCredit, Livemode: &live}
	b.ReportAllocs()
	for b.Loop() {
		if origin.Foreign(&e, true) != "" {
			b.Fatal("foreign")
		}
	}
}
