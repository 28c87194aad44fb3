package outbound

import (
	"fmt"
	"slices"
	"strings"

	"github.com/aegis-payments/aegis/pkg/event"
)

// maxTypes bounds one endpoint's filter.
const maxTypes = 64

// CheckTypes refuses a filter entry that is neither a settlements event
// type nor a wildcard over a prefix one of them has ("payout.*"); "*" alone
// is refused too: an empty filter is how an endpoint wants every type.
func CheckTypes(types []string) error {
	if len(types) > maxTypes {
		return fmt.Errorf("at most %d event types", maxTypes)
	}
	known := event.SettlementTypes()
	for _, t := range types {
		if prefix, ok := strings.CutSuffix(t, "*"); ok {
			if !strings.HasSuffix(prefix, ".") || !slices.ContainsFunc(known, func(k event.Type) bool {
				return strings.HasPrefix(string(k), prefix)
			}) {
				return fmt.Errorf("event type %q: a wildcard is a known prefix and .* (payout.*)", t)
			}
			continue
		}
		if !slices.Contains(known, event.Type(t)) {
			return fmt.Errorf("event type %q is not a settlements event type (docs/guides/settlements.md)", t)
		}
	}
	return nil
}

// Wants reports whether an endpoint with filter types wants an event of
// type typ: an empty filter wants all; "payout.*" wants every payout.
// outbound_deliveries' fan-out and recover_outbound_endpoint (SQL) decide
// the same way.
func Wants(types []string, typ string) bool {
	if len(types) == 0 {
		return true
	}
	for _, t := range types {
		if t == typ {
			return true
		}
		if prefix, ok := strings.CutSuffix(t, "*"); ok && strings.HasPrefix(typ, prefix) {
			return true
		}
	}
	return false
}
