package consumer

import (
	"context"
	"errors"

	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/errclass"
)

// Classify is the default Config.Classify: what a handler's error means for
// its record.
//
//   - An explicit class (errclass.AsPermanent, AsPoison, AsTransient, a
//     recovered panic) wins.
//   - Context cancellation while the loop runs (the handler cancelled its
//     own work, a lost lock) is transient: nothing was decided. While the
//     loop stops it is Canceled.
//   - A Postgres error is transient when its SQLSTATE says the same
//     statement may succeed later or it never got an answer; a unique
//     violation is a concurrent duplicate, and the retry finds the record
//     processed. Any other Postgres refusal (a value out of range, a check
//     violation) refuses the same data every time and is permanent.
//   - Anything else is transient: retrying something harmless a bounded
//     number of times is safer than dead-lettering on a guess, and the bound
//     ends it in a dead letter.
func Classify(ctx context.Context, err error) errclass.Class {
	if err == nil {
		return ""
	}
	if c, ok := errclass.Explicit(err); ok {
		return c
	}
	if errors.Is(err, context.Canceled) {
		if ctx.Err() != nil {
			return errclass.Canceled
		}
		return errclass.Transient
	}
	if database.IsTransient(err) || database.IsUniqueViolation(err, "") {
		return errclass.Transient
	}
	if database.IsPermanent(err) {
		return errclass.Permanent
	}
	return errclass.Transient
}
