package fault

import "errors"

// Unavailable is an error of the part of dlq-admin named What: its
// Postgres, Kafka or a job queue did not answer, or answered with an
// error nobody maps to a better status.
type Unavailable struct {
	// What names the part as a sentence's subject: "the audit log".
	What string
	Err  error
}

// Error is the wrapped error's text, unchanged.
func (e *Unavailable) Error() string { return e.Err.Error() }

func (e *Unavailable) Unwrap() error { return e.Err }

// Mark marks *err as what's, unless it is nil or already marked. Deferred
// at the top of an area's exported call, it marks every error the call
// returns:
//
//	defer fault.Mark(&err, "the audit log")
func Mark(err *error, what string) {
	if *err == nil {
		return
	}
	var u *Unavailable
	if errors.As(*err, &u) {
		return
	}
	*err = &Unavailable{What: what, Err: *err}
}

// What is the part that failed, as marked; "" for an unmarked error.
func What(err error) string {
	var u *Unavailable
	if errors.As(err, &u) {
		return u.What
	}
	return ""
}
