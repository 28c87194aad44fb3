package validation

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Error names the field a request got wrong.
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string { return e.Field + ": " + e.Message }

// Text checks that s is storable text of 1 to max bytes: valid UTF-8, no NUL
// and no other control character.
func Text(field, s string, max int) error {
	switch {
	case s == "" || len(s) > max:
		return &Error{field, "required, at most " + strconv.Itoa(max) + " bytes"}
	case !utf8.ValidString(s) || strings.IndexFunc(s, isControl) >= 0:
		return &Error{field, "must be UTF-8 text without control characters"}
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
