package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aegis-payments/aegis/pkg/event"
)

// maxField is the longest PSP identifier (event id, type, object id, status)
// stored as sent. Real ones are a few dozen bytes; the limit keeps every
// indexed column far below Postgres' B-tree row limit.
const maxField = 255

// unstorable says why a verified webhook cannot be stored as it was sent, and
// whether its body at least fits a jsonb column. It is the cheap check made
// before the transaction; Postgres refusing what it lets through is the
// safety net (Store.SaveGroup).
type unstorable struct {
	reason string
	bodyOK bool
}

// checkStorable finds what Postgres would refuse in p: text that is not
// UTF-8 or holds NUL, identifiers over their limits (a user id is a Kafka
// key and an indexed column), and JSON escapes jsonb cannot hold.
func checkStorable(p Pending) unstorable {
	var problems []string
	e := p.Event.Event
	for _, f := range []struct {
		name, value string
		max         int
	}{
		{"event id", e.EventID, maxField},
		{"event type", e.Type, maxField},
		{"object id", e.Reference, maxField},
		{"user_id", e.UserID, event.MaxUserID},
		{"payout_id", e.PayoutID, maxField},
		{"currency", e.Currency, maxField},
		{"object status", e.ObjectStatus, maxField},
		{"failure code", e.FailureCode, maxField},
	} {
		switch {
		case !utf8.ValidString(f.value) || strings.ContainsRune(f.value, 0):
			problems = append(problems, f.name+" holds NUL or invalid UTF-8")
		case len(f.value) > f.max:
			problems = append(problems, fmt.Sprintf("%s is %d bytes, over the limit of %d", f.name, len(f.value), f.max))
		}
	}
	body := jsonbProblem(p.Body)
	if body != "" {
		problems = append(problems, "body "+body)
	}
	if len(problems) == 0 {
		return unstorable{}
	}
	return unstorable{reason: "cannot be stored as sent: " + strings.Join(problems, "; "), bodyOK: body == ""}
}

// jsonbProblem reports what in a valid JSON document Postgres' jsonb refuses:
// invalid UTF-8, a \u0000 escape, or a UTF-16 surrogate escape without its
// pair (a number beyond numeric's range is left to the database).
func jsonbProblem(doc []byte) string {
	if !utf8.Valid(doc) {
		return "is not valid UTF-8"
	}
	for i := 0; i < len(doc); i++ {
		if doc[i] != '\\' {
			continue
		}
		if i+1 >= len(doc) || doc[i+1] != 'u' {
			i++ // an escaped character, possibly a backslash
			continue
		}
		r, ok := hex4(doc, i+2)
		switch {
		case !ok:
		case r == 0:
			return `holds a \u0000 escape`
		case r >= 0xD800 && r <= 0xDBFF:
			low, ok := hex4(doc, i+8)
			if i+7 >= len(doc) || doc[i+6] != '\\' || doc[i+7] != 'u' || !ok || low < 0xDC00 || low > 0xDFFF {
				return "holds an unpaired UTF-16 surrogate escape"
			}
			i += 6
		case r >= 0xDC00 && r <= 0xDFFF:
			return "holds an unpaired UTF-16 surrogate escape"
		}
		i += 5
	}
	return ""
}

// hex4 reads the four hex digits at doc[at:at+4].
func hex4(doc []byte, at int) (rune, bool) {
	if at+4 > len(doc) {
		return 0, false
	}
	var r rune
	for _, c := range doc[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// keep returns s when Postgres can store it as a field of at most max bytes,
// and "" (stored as NULL) otherwise.
func keep(s string, max int) string {
	if len(s) > max || !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return ""
	}
	return s
}

// clip returns s made storable: invalid UTF-8 and NUL replaced, cut to at
// most max bytes on a character boundary.
func clip(s string, max int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// storedEventID is the identity an unstorable event is deduplicated under:
// its own id when that can be stored, otherwise a digest of it, so that the
// PSP's retries of the same event still find the first delivery.
func storedEventID(id string) string {
	if keep(id, maxField) != "" {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// inboxPayload is what webhook_events.payload holds for an unstorable event:
// the body when jsonb takes it, otherwise a note pointing at the dead
// letter, which keeps the body byte for byte.
func inboxPayload(body []byte, u unstorable) []byte {
	if u.bodyOK {
		return body
	}
	sum := sha256.Sum256(body)
	note, _ := json.Marshal(map[string]any{ // a map of strings and ints always encodes
		"unstorable":  u.reason,
		"body_sha256": hex.EncodeToString(sum[:]),
		"body_bytes":  len(body),
		"body_in":     "dead_letters (source ingest, same correlation_id)",
	})
	return note
}

// storableTime keeps t within what timestamptz holds and what is plausible.
func storableTime(t, now time.Time) time.Time {
	if t.Year() < 1970 || t.After(now.Add(24*time.Hour)) {
		return now
	}
	return t
}
