package consume_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine they started is still
// running after the last one: a component that is not joined on Stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
