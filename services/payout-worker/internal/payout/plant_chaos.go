//go:build chaos

package payout

import "os"

// envPlantLateFirstAttempt, set to 1 in a binary built with -tags chaos,
// plants a known double-pay defect for the chaos suite to catch: a create
// is recorded only after its answer (first_attempt_at set from the answer,
// no "sending" row, no sending_at), so a payout whose call's answer was
// never recorded is resumed as if nothing had been sent, and past the
// PSP's idempotency window re-sent without a lookup. It is not
// configuration (no config reader, configuration reference or manifest has it) and
// exists in no other build (plant.go).
const envPlantLateFirstAttempt = "AEGIS_PLANT_LATE_FIRST_ATTEMPT"

// plantedLateFirstAttempt reports whether the defect is planted. It reads
// the environment each time rather than keeping package state.
func plantedLateFirstAttempt() bool { return os.Getenv(envPlantLateFirstAttempt) == "1" }
