package proctest

import "testing"

// Heavy skips t when tests run with -short (`make test-fast`): the fast tier
// runs unit and store tests only. A test is heavy when it builds or runs
// binaries, starts a stack, a browser or a chaos run, or waits out real
// session or rebalance timeouts; `make test` runs it. Build calls it, so a
// test that builds a binary needs no call of its own.
func Heavy(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("%s: a heavy test, skipped with -short (make test runs it)", what)
	}
}
