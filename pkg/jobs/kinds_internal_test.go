package jobs

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"
)

// A stand-in never works a job silently: handed one, it fails it (River
// retries it); it states its kind's timeout and River's default retry.
func TestStandInFailsAJobItIsHanded(t *testing.T) {
	w := &standIn[pspRunStandIn]{timeout: 7 * time.Minute}
	j := &river.Job[pspRunStandIn]{JobRow: &rivertype.JobRow{ID: 1, Kind: KindPSPRun, Queue: PSPReconcileQueue}}
	require.ErrorIs(t, w.Work(context.Background(), j), errNotWorkedHere)
	require.Equal(t, 7*time.Minute, w.Timeout(j))
	require.True(t, w.NextRetry(j).IsZero(), "River's default retry, as the kind's own worker")
}

// The rescue horizon is the shortest timeout, so that no kind is rescued
// before its own timeout, whichever client leads.
func TestRescueAfterIsTheShortestTimeout(t *testing.T) {
	require.Equal(t, DefaultReplayTimeout, Kinds{}.RescueAfter())
	require.Equal(t, 2*time.Second, Kinds{PSPRunTimeout: 2 * time.Second}.RescueAfter())
	err := Kinds{ReplayTimeout: -1, PSPRunTimeout: time.Millisecond}.WithDefaults().Validate()
	require.ErrorContains(t, err, "Kinds.ReplayTimeout must be at least 1s")
	require.ErrorContains(t, err, "Kinds.PSPRunTimeout must be at least 1s")
}
