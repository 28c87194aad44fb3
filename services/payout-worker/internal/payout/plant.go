//go:build !chaos

package payout

// envPlantLateFirstAttempt names the chaos build's switch (plant_chaos.go);
// in every other build nothing reads it.
const envPlantLateFirstAttempt = "AEGIS_PLANT_LATE_FIRST_ATTEMPT"

// plantedLateFirstAttempt is false outside the chaos build: the defect
// cannot be switched on in a production binary, and the compiler drops the
// code it guards.
func plantedLateFirstAttempt() bool { return false }
