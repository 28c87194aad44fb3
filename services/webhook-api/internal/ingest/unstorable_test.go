package ingest

import "testing"

func TestJSONBProblem(t *testing.T) {
	t.Parallel()
	for doc, bad := range map[string]bool{
		`{"a":"plain"}`:                   false,
		`{"a":"\\u0000"}`:                 false, // an escaped backslash, then text
		`{"a":"\u00e9\u0041"}`:            false,
		`{"a":"\ud83d\ude00"}`:            false, // a surrogate pair
		`{"a":"x\u0000"}`:                 true,
		`{"a":"\U0000"}`:                  false, // not an escape JSON knows; never reached Postgres
		`{"a":"\ud83d"}`:                  true,
		`{"a":"\ud83dx"}`:                 true,
		`{"a":"\ud83d\u0041"}`:            true,
		`{"a":"\ude00"}`:                  true,
		`{"a":"\\\u0000"}`:                true, // an escaped backslash, then a NUL
		"{\"a\":\"\xff\"}":                true,
		`{"a":"\ud83d\ude00\u0000"}`:      true,
		`{"k\u0000":1}`:                   true,
		`["\ud83d\ude00","\udbff\udfff"]`: false,
	} {
		if got := jsonbProblem([]byte(doc)) != ""; got != bad {
			t.Errorf("jsonbProblem(%s) = %v, want %v", doc, got, bad)
		}
	}
}
