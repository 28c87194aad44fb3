// Package breaker builds the sony/gobreaker circuit breakers that sit in
// front of each external dependency (each PSP; Kafka for the relay).
//
// Defaults are the seeds': open after 5 consecutive failures, stay open 30s,
// let 1 probe through half-open. Only transient failures count: a permanent
// error (an invalid account) says nothing about the dependency's health, and a
// call we cancelled ourselves says nothing either. While the breaker is open
// the call is not made and Execute returns an error of class BreakerOpen, so
// the caller defers the work without spending a retry attempt. The state is
// exported as a gauge (0 closed, 1 half-open, 2 open).
package breaker
