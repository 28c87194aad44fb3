package breaker

import (
	"slices"
	"testing"

	"github.com/sony/gobreaker/v2"
)

// Every gobreaker state maps to a listed State with gobreaker's own name
// (the label values dashboards and alert rules already use), and the gauge
// value is the State's position in States.
func TestStatesCoverGobreaker(t *testing.T) {
	for _, s := range []gobreaker.State{gobreaker.StateClosed, gobreaker.StateHalfOpen, gobreaker.StateOpen} {
		got := stateOf(s)
		if string(got) != s.String() {
			t.Errorf("stateOf(%s) = %q, want gobreaker's name %q", s, got, s.String())
		}
		if i := slices.Index(States(), got); i != stateValue(s) {
			t.Errorf("%s is at %d in States(), its gauge value is %d", got, i, stateValue(s))
		}
	}
}
