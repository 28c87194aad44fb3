package input_test

import (
	"errors"
	"testing"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/input"
)

// Text Postgres cannot store is the caller's mistake (400), named by its
// parameter, never a failure of the store (503).
func TestValuesPostgresCannotStoreAsTextAreInvalid(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"\xff", "a\x00b"} {
		var invalid *input.Invalid
		if err := input.Text("topic", v); !errors.As(err, &invalid) || invalid.Param != "topic" {
			t.Errorf("Text(%q) = %v, want an *Invalid naming topic", v, err)
		}
		if err := input.CheckReason(v, "say why"); !errors.As(err, &invalid) || invalid.Param != "reason" {
			t.Errorf("CheckReason(%q) = %v, want an *Invalid naming reason", v, err)
		}
	}
	if err := input.Text("topic", "aegis.transactions.dlq ünïcode"); err != nil {
		t.Errorf("valid text refused: %v", err)
	}
}
