package input

import (
	"fmt"
	"strings"
	"unicode/utf8"
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

// Text refuses a value Postgres cannot store as text (invalid UTF-8, or a
// NUL byte), naming param: such a value is the caller's mistake, a 400,
// not a failure of the store.
func Text(param, value string) error {
	if !utf8.ValidString(value) || strings.ContainsRune(value, 0) {
		return &Invalid{Param: param, Reason: "must be UTF-8 text without NUL characters"}
	}
	return nil
}

// MaxReasonLength bounds an operator's reason.
const MaxReasonLength = 2000

// CheckReason refuses an operator's reason that is not text (Text), too
// long or, when required is not "" (what the reason must say: "say why
// ..."), blank.
func CheckReason(reason, required string) error {
	if err := Text("reason", reason); err != nil {
		return err
	}
	if required != "" && strings.TrimSpace(reason) == "" {
		return &Invalid{Param: "reason", Reason: "is required: " + required}
	}
	if len(reason) > MaxReasonLength {
		return &Invalid{Param: "reason", Reason: fmt.Sprintf("must be at most %d characters", MaxReasonLength)}
	}
	return nil
}
