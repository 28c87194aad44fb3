package person

import (
	"fmt"
	"slices"
	"strings"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Normalize is the form in which two identities are compared: NFKC, case
// folded (Unicode full case folding, not ToLower), trimmed, inner white
// space collapsed to one space.
func Normalize(s string) string {
	s = norm.NFKC.String(s)
	s = cases.Fold().String(s)
	// Folding can produce a string that is no longer NFKC (it is rare, but
	// the Unicode standard's caseless matching applies NFKC again).
	s = norm.NFKC.String(s)
	return strings.Join(strings.Fields(s), " ")
}

// Directory maps token names to the person holding them.
type Directory struct {
	of map[string]string
}

// Parse reads DLQ_ADMIN_TOKEN_PERSONS: "token-name=person,…". Each name
// must be one of tokens (the configured token names): a mapping that names
// no token is a typo that would leave a real token its own person. A token
// listed twice, or with an empty person, is refused.
func Parse(spec string, tokens []string) (*Directory, error) {
	d := &Directory{of: map[string]string{}}
	for i, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, who, ok := strings.Cut(item, "=")
		name, who = strings.TrimSpace(name), Normalize(who)
		if !ok || name == "" || who == "" {
			return nil, fmt.Errorf("entry %d: want token-name=person", i+1)
		}
		if !slices.Contains(tokens, name) {
			return nil, fmt.Errorf("entry %d: %q is not the name of a configured token", i+1, name)
		}
		if _, dup := d.of[name]; dup {
			return nil, fmt.Errorf("entry %d: token %q is listed twice", i+1, name)
		}
		d.of[name] = who
	}
	return d, nil
}

// Of is the person who holds the token named tokenName, normalised: the
// configured person, or the token's own name when none is configured.
func (d *Directory) Of(tokenName string) string {
	if d != nil {
		if who, ok := d.of[tokenName]; ok {
			return who
		}
	}
	return Normalize(tokenName)
}

// Same reports whether two token names belong to one person.
func (d *Directory) Same(a, b string) bool { return d.Of(a) == d.Of(b) }

// Listed reports whether tokenName's person is configured.
func (d *Directory) Listed(tokenName string) bool {
	if d == nil {
		return false
	}
	_, ok := d.of[tokenName]
	return ok
}
