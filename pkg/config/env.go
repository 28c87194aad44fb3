package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Env reads typed values from a getenv function (os.Getenv in main, a map in
// tests) and remembers every malformed value for Err.
type Env struct {
	getenv func(string) string
	errs   []error
}

// New returns an Env reading through getenv.
func New(getenv func(string) string) *Env {
	return &Env{getenv: getenv}
}

// Lookup returns the trimmed value of name and whether it is set and non-empty.
func (e *Env) Lookup(name string) (string, bool) {
	v := strings.TrimSpace(e.getenv(name))
	return v, v != ""
}

// String returns the value of name, or def when unset.
func (e *Env) String(name, def string) string {
	if v, ok := e.Lookup(name); ok {
		return v
	}
	return def
}

// Int returns the integer value of name, or def when unset.
func (e *Env) Int(name string, def int) int {
	v, ok := e.Lookup(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		e.Errorf("%s must be an integer, got %q", name, v)
		return def
	}
	return n
}

// Uint32 returns the value of name as a non-negative 32-bit count, or def
// when unset; a negative or larger value is an error, not a wrap-around.
func (e *Env) Uint32(name string, def uint32) uint32 {
	v, ok := e.Lookup(name)
	if !ok {
		return def
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		e.Errorf("%s must be a whole number from 0 to %d, got %q", name, uint32(math.MaxUint32), v)
		return def
	}
	return uint32(n)
}

// Float returns the float value of name, or def when unset.
func (e *Env) Float(name string, def float64) float64 {
	v, ok := e.Lookup(name)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		e.Errorf("%s must be a number, got %q", name, v)
		return def
	}
	return f
}

// Bool returns the boolean value of name (true/false/1/0), or def when unset.
func (e *Env) Bool(name string, def bool) bool {
	v, ok := e.Lookup(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		e.Errorf("%s must be true or false, got %q", name, v)
		return def
	}
	return b
}

// Duration returns the duration value of name (Go syntax: 500ms, 30s, 5m),
// or def when unset.
func (e *Env) Duration(name string, def time.Duration) time.Duration {
	v, ok := e.Lookup(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		e.Errorf("%s must be a duration such as 500ms or 30s, got %q", name, v)
		return def
	}
	return d
}

// List returns the comma-separated values of name, trimmed, empty ones
// dropped; nil when unset.
func (e *Env) List(name string) []string {
	v, ok := e.Lookup(name)
	if !ok {
		return nil
	}
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Errorf records a validation problem; callers use it for checks that span
// several values ("HTTP_ADDR must be host:port").
func (e *Env) Errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Errorf(format, args...))
}

// Err returns every problem recorded so far, joined, or nil.
func (e *Env) Err() error {
	if len(e.errs) == 0 {
		return nil
	}
	return fmt.Errorf("invalid configuration: %w", errors.Join(e.errs...))
}
