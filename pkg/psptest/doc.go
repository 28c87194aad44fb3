// Package psptest runs the PSP stand-in (tools/devstack/cmd/aegis-psp) as a
// real process for tests and reads its record of calls and objects, which is
// what tests assert on ("at most one payout per payout id"). Import it only
// from _test.go files.
package psptest
