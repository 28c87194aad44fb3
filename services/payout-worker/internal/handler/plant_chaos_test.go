//go:build chaos

package handler_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The chaos build's planted defect (AEGIS_PLANT_LATE_FIRST_ATTEMPT=1)
// restores the ordering that pays twice: the create is recorded only with
// its answer, so a call whose answer is lost leaves no trace and the late
// resume sends it again under a key the PSP has forgotten. This is what the
// chaos suite must catch; run with go test -tags chaos.
func TestPlantedLateFirstAttemptPaysTwice(t *testing.T) {
	t.Setenv("AEGIS_PLANT_LATE_FIRST_ATTEMPT", "1")
	w, pid, _ := resumeAfterTheIdempotencyWindow(t)
	require.Len(t, w.psp.Objects(t, pid), 2, "the planted defect pays twice")
}
