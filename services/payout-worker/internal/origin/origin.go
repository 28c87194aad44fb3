package origin

import (
	"fmt"

	"github.com/aegis-payments/aegis/pkg/event"
	"github.com/aegis-payments/aegis/pkg/provider"
)

// Foreign says why e is not evidence about our own money in our key's mode,
// or "" when it is. stripeLivemode is the mode of our Stripe key (true for
// sk_live_/rk_live_). See the package doc for the rule and its sources.
func Foreign(e *event.PSPEvent, stripeLivemode bool) string {
	return ForeignFor(e, stripeLivemode, "")
}

// ForeignFor is Foreign for an event that may come from one connected
// account of ours: account, the destination of a payout that Stripe pays
// out on that account ("" none). Its events are the evidence of that
// payout; any other account's, or any event's in the other mode, are not.
func ForeignFor(e *event.PSPEvent, stripeLivemode bool, account string) string {
	if e.Provider != string(provider.Stripe) {
		return ""
	}
	switch {
	case e.Account != "" && e.Account != account:
		// We take no Connect money events but those of the account a
		// payout pays out on.
		return fmt.Sprintf("sent for connected account %q", e.Account)
	case e.Livemode == nil && stripeLivemode:
		return "no livemode, our key is live"
	case e.Livemode != nil && *e.Livemode != stripeLivemode:
		return fmt.Sprintf("livemode %t, our key's %t", *e.Livemode, stripeLivemode)
	}
	return ""
}
