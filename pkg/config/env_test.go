package config

import (
	"strings"
	"testing"
	"time"
)

func TestEnv(t *testing.T) {
	t.Parallel()
	vars := map[string]string{
		"A_INT":   "42",
		"A_BAD":   "forty",
		"A_DUR":   "250ms",
		"A_LIST":  " a, ,b ,c",
		"A_BOOL":  "true",
		"A_FLOAT": "0.5",
		"A_SPACE": "   ",
	}
	env := New(func(k string) string { return vars[k] })

	if got := env.Int("A_INT", 1); got != 42 {
		t.Fatalf("Int = %d, want 42", got)
	}
	if got := env.Int("A_MISSING", 7); got != 7 {
		t.Fatalf("Int default = %d, want 7", got)
	}
	if got := env.Duration("A_DUR", time.Second); got != 250*time.Millisecond {
		t.Fatalf("Duration = %s", got)
	}
	if got := strings.Join(env.List("A_LIST"), "|"); got != "a|b|c" {
		t.Fatalf("List = %q", got)
	}
	if !env.Bool("A_BOOL", false) || env.Float("A_FLOAT", 0) != 0.5 {
		t.Fatal("Bool/Float misread")
	}
	if got := env.String("A_SPACE", "def"); got != "def" {
		t.Fatalf("blank value should fall back to default, got %q", got)
	}
	if err := env.Err(); err != nil {
		t.Fatalf("no error expected yet: %v", err)
	}

	if got := env.Int("A_BAD", 3); got != 3 {
		t.Fatalf("malformed Int should return default, got %d", got)
	}
	env.Duration("A_BAD", 0)
	err := env.Err()
	if err == nil {
		t.Fatal("malformed values must be reported")
	}
	for _, want := range []string{"A_BAD must be an integer", "A_BAD must be a duration"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
