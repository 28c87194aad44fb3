package consume

import (
	"context"
	"errors"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/errclass"
)

// classify decides what a handler's error means for its record.
//
//   - An explicit class (errclass.AsPermanent, AsPoison, a PSP error, a busy
//     wallet lock) wins.
//   - Context cancellation while the worker runs (the wallet lock was lost
//     and cancelled the work) is transient: nothing was decided.
//   - A Postgres error is transient when its SQLSTATE says the same
//     statement may succeed later (classes 08, 40, 53, 57, and 55P03) or it
//     never got an answer (a lost connection, a timeout); any other server
//     error (a value out of range, a violated constraint that is not an
//     expected duplicate, an undefined column) refuses the same data every
//     time and is permanent for this record. A unique violation is the
//     exception: it is a concurrent duplicate, and the retry finds the
//     record processed.
//   - Anything else is transient: retrying something harmless a bounded
//     number of times is safer than dead-lettering money on a guess, and the
//     bound (Config.RetryInPlaceAttempts / RetryInPlaceFor) ends it in a
//     dead letter.
//
// permanentAsTransient is the planted defect the chaos suite uses to show
// that it notices the old behaviour: every Postgres refusal retried in
// place (and, with the bound disabled, forever).
func classify(ctx context.Context, err error, permanentAsTransient bool) errclass.Class {
	if err == nil {
		return ""
	}
	if c, ok := errclass.Explicit(err); ok {
		if permanentAsTransient && c == errclass.Permanent && database.IsPermanent(err) {
			return errclass.Transient
		}
		return c
	}
	if errors.Is(err, context.Canceled) {
		if ctx.Err() != nil {
			return errclass.Canceled
		}
		return errclass.Transient
	}
	if database.IsTransient(err) || database.IsUniqueViolation(err, "") {
		// A duplicate is what a concurrent delivery of the same record
		// (during a rebalance) runs into: the retry finds it processed.
		return errclass.Transient
	}
	if database.IsPermanent(err) && !permanentAsTransient {
		return errclass.Permanent
	}
	return errclass.Transient
}
