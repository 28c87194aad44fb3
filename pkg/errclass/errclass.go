package errclass

import (
	"context"
	"errors"
	"time"
)

// Class is how a failure is handled.
type Class string

const (
	// Transient failures are retried with backoff until attempts run out.
	Transient Class = "transient"
	// Permanent failures are never retried: they go to the dead-letter store.
	Permanent Class = "permanent"
	// Poison marks a message that cannot even be decoded.
	Poison Class = "poison"
	// BreakerOpen means the call was not made; the work is deferred without
	// spending an attempt.
	BreakerOpen Class = "breaker_open"
	// Canceled means our own process is stopping; the work is left for
	// redelivery and counts as no attempt.
	Canceled Class = "canceled"
)

type classified struct {
	err        error
	class      Class
	retryAfter time.Duration
}

func (e *classified) Error() string { return e.err.Error() }
func (e *classified) Unwrap() error { return e.err }

// New wraps err with class. A nil err stays nil.
func New(class Class, err error) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, class: class}
}

// AsPermanent marks err permanent.
func AsPermanent(err error) error { return New(Permanent, err) }

// AsTransient marks err transient.
func AsTransient(err error) error { return New(Transient, err) }

// AsPoison marks err as an undecodable message.
func AsPoison(err error) error { return New(Poison, err) }

// RetryAfter marks err transient with a server-requested delay (a 429's
// Retry-After); the retry honours it and does not spend an attempt.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &classified{err: err, class: Transient, retryAfter: d}
}

// Of returns err's class: the innermost explicit class wins over context
// state, and an unclassified error is Transient.
func Of(err error) Class {
	if err == nil {
		return ""
	}
	var c *classified
	if errors.As(err, &c) {
		return c.class
	}
	if errors.Is(err, context.Canceled) {
		return Canceled
	}
	return Transient
}

// RetryAfterOf returns the server-requested delay carried by err, if any.
func RetryAfterOf(err error) (time.Duration, bool) {
	var c *classified
	if errors.As(err, &c) && c.retryAfter > 0 {
		return c.retryAfter, true
	}
	return 0, false
}

// Explicit returns the class err was marked with, if any. Unlike Of it does
// not default: a caller that knows more about unmarked errors (a Postgres
// error code, say) decides for itself.
func Explicit(err error) (Class, bool) {
	var c *classified
	if errors.As(err, &c) {
		return c.class, true
	}
	return "", false
}
