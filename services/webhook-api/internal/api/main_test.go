package api_test

import (
	"os"
	"testing"

	"github.com/aegis-payments/aegis/pkg/psptest"
)

// Destinations are checked at the PSP stand-in, built once for the package.
func TestMain(m *testing.M) { os.Exit(psptest.Main(m)) }
