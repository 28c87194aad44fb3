package fault_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/fault"
)

var errSentinel = errors.New("letter not found")

func mark(err error, what string) (out error) {
	defer fault.Mark(&out, what)
	return err
}

func TestMarkNamesThePartAndKeepsTheError(t *testing.T) {
	err := mark(fmt.Errorf("get letter 7: %w", errSentinel), "the dead-letter store")
	require.Equal(t, "the dead-letter store", fault.What(err))
	require.ErrorIs(t, err, errSentinel, "errors.Is still finds what the area returned")
	require.Equal(t, "get letter 7: letter not found", err.Error(), "the text is unchanged")
}

func TestMarkKeepsTheDeepestPart(t *testing.T) {
	inner := mark(errors.New("connection refused"), "the audit log")
	outer := mark(fmt.Errorf("replay letter 7: %w", inner), "the dead-letter store")
	require.Equal(t, "the audit log", fault.What(outer), "the part that failed is the one that marked first")
}

func TestMarkLeavesNilAndUnmarkedAlone(t *testing.T) {
	require.NoError(t, mark(nil, "the audit log"))
	require.Empty(t, fault.What(errors.New("plain")))
}
