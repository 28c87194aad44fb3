package input

import (
	"fmt"
	"strings"
)

// Page sizes of every list.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// Invalid is a value an area cannot use. Param is the parameter's name as
// the API spells it (status, limit, cursor, reason, ...), so callers can say
// which one was wrong.
type Invalid struct {
	Param  string
	Reason string
}

func (e *Invalid) Error() string { return e.Param + ": " + e.Reason }

// Limit is a list's page size: DefaultLimit for 0, else n when it is
// between 1 and most; an *Invalid naming "limit" otherwise.
func Limit(n, most int) (int, error) {
	if n == 0 {
		return DefaultLimit, nil
	}
	if n < 1 || n > most {
		return 0, &Invalid{Param: "limit", Reason: fmt.Sprintf("must be between 1 and %d", most)}
	}
	return n, nil
}

// MaxReasonLength bounds an operator's reason.
const MaxReasonLength = 2000

// CheckReason refuses an operator's reason that is too long or, when
// required is not "" (what the reason must say: "say why ..."), blank.
func CheckReason(reason, required string) error {
	if required != "" && strings.TrimSpace(reason) == "" {
		return &Invalid{Param: "reason", Reason: "is required: " + required}
	}
	if len(reason) > MaxReasonLength {
		return &Invalid{Param: "reason", Reason: fmt.Sprintf("must be at most %d characters", MaxReasonLength)}
	}
	return nil
}
