package payout

import (
	"testing"

	"github.com/aegis-payments/aegis/pkg/errclass"
)

// allowed is the state machine written out by hand, independently of next():
// the test below checks every (from, to) pair of statuses() against it, so a
// state added without deciding its transitions fails here.
func allowed() map[Status][]Status {
	return map[Status][]Status{
		Initialized: {Sending, Failed},
		Sending:     {Sent, Retrying, Failed, NeedsReview, Succeeded},
		Sent:        {Awaiting, Succeeded, Failed},
		Awaiting:    {Succeeded, Failed, NeedsReview},
		Retrying:    {Sending, Succeeded, Failed, NeedsReview},
		Failed:      {Finalized},
		NeedsReview: {Sending, Succeeded, Failed},
		Succeeded:   {Failed},
		Finalized:   {NeedsReview},
	}
}

func TestTransitionMatrix(t *testing.T) {
	for _, from := range statuses() {
		targets, ok := allowed()[from]
		if !ok {
			t.Errorf("status %s has no row in the test's transition table: decide its transitions", from)
			continue
		}
		for _, to := range statuses() {
			want := false
			for _, a := range targets {
				want = want || a == to
			}
			t.Run(string(from)+"→"+string(to), func(t *testing.T) {
				err := checkTransition(from, to)
				if want {
					if err != nil {
						t.Fatalf("allowed transition refused: %v", err)
					}
					return
				}
				if err == nil {
					t.Fatal("refused transition allowed")
				}
				if c := errclass.Of(err); c != errclass.Permanent {
					t.Fatalf("refusal class = %q, want %q (the same record refuses every time)", c, errclass.Permanent)
				}
			})
		}
	}
}

func TestTransitionTableNamesOnlyKnownStatuses(t *testing.T) {
	known := map[Status]bool{}
	for _, s := range statuses() {
		if known[s] {
			t.Errorf("statuses() lists %s twice", s)
		}
		known[s] = true
	}
	for from, targets := range allowed() {
		if !known[from] {
			t.Errorf("transition table has a row for unknown status %q", from)
		}
		for _, to := range targets {
			if !known[to] {
				t.Errorf("transition table allows %s → unknown status %q", from, to)
			}
		}
	}
}

func TestUnknownStatusesAreRefused(t *testing.T) {
	for _, tc := range []struct{ from, to Status }{
		{"", Sending},
		{Initialized, ""},
		{"initialized", Sending}, // statuses are case-sensitive, as in the CHECK constraint
		{Initialized, "sending_to_gateway"},
		{"PAUSED", Failed},
	} {
		if err := checkTransition(tc.from, tc.to); err == nil || errclass.Of(err) != errclass.Permanent {
			t.Errorf("checkTransition(%q, %q) = %v, want a permanent refusal", tc.from, tc.to, err)
		}
	}
}

func TestInFlight(t *testing.T) {
	// In flight: the PSP may still act on the payout, so its hold must stay.
	want := map[Status]bool{
		Initialized: false, // the PSP has never heard of it
		Sending:     true,
		Sent:        true,
		Awaiting:    true,
		Retrying:    true,
		NeedsReview: true,
		Succeeded:   false,
		Failed:      false,
		Finalized:   false,
	}
	for _, s := range statuses() {
		w, ok := want[s]
		if !ok {
			t.Errorf("status %s: decide whether it is in flight", s)
			continue
		}
		if got := inFlight(s); got != w {
			t.Errorf("inFlight(%s) = %v, want %v", s, got, w)
		}
	}
}
