package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aegis-payments/aegis/pkg/config"
)

type inner struct{ Base, Max time.Duration }

func (c inner) Validate() error {
	var errs []error
	if c.Base <= 0 {
		errs = append(errs, config.Invalid("Base", "must be positive"))
	}
	if c.Max < c.Base {
		errs = append(errs, config.Invalid("Max", "(%s) must be at least %s (%s)", c.Max, config.Ref("Base"), c.Base))
	}
	return errors.Join(errs...)
}

type outer struct {
	Timeout time.Duration
	Backoff inner
}

func (c outer) Validate() error {
	var errs []error
	if c.Timeout <= 0 {
		errs = append(errs, config.Invalid("Timeout", "must be positive"))
	}
	errs = append(errs, config.Within("Backoff", c.Backoff.Validate()), errors.New("a problem that is no field's"))
	return errors.Join(errs...)
}

func TestCheckNamesVariables(t *testing.T) {
	c := outer{Backoff: inner{Base: 2 * time.Second, Max: time.Second}}
	// The domain's own error speaks in Go fields.
	if got := c.Validate().Error(); !strings.Contains(got, "Backoff.Max (1s) must be at least Backoff.Base (2s)") {
		t.Errorf("domain error = %q", got)
	}
	env := config.New(func(string) string { return "" })
	env.Check(c.Validate(), map[string]string{
		"Timeout":      "X_TIMEOUT",
		"Backoff.Base": "X_BACKOFF_BASE",
		// Backoff.Max deliberately unmapped: it keeps its Go path.
	})
	got := env.Err().Error()
	for _, want := range []string{
		"X_TIMEOUT must be positive",
		"Backoff.Max (1s) must be at least X_BACKOFF_BASE (2s)",
		"a problem that is no field's",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Err() = %q, want it to contain %q", got, want)
		}
	}
	if strings.Contains(got, "Timeout must") {
		t.Errorf("Err() = %q still names the Go field Timeout", got)
	}
}

func TestCheckNil(t *testing.T) {
	env := config.New(func(string) string { return "" })
	env.Check(nil, nil)
	env.Check(config.Within("X", nil), nil)
	if err := env.Err(); err != nil {
		t.Fatalf("Err() = %v after checking nil errors", err)
	}
}

func TestUint32RefusesWrapAround(t *testing.T) {
	vars := map[string]string{"N": "-1", "BIG": "4294967296", "OK": "7"}
	env := config.New(func(k string) string { return vars[k] })
	if got := env.Uint32("OK", 1); got != 7 {
		t.Errorf("Uint32(OK) = %d", got)
	}
	if got := env.Uint32("UNSET", 5); got != 5 {
		t.Errorf("Uint32(UNSET) = %d", got)
	}
	env.Uint32("N", 1)
	env.Uint32("BIG", 1)
	err := env.Err()
	if err == nil || !strings.Contains(err.Error(), "N must be a whole number") || !strings.Contains(err.Error(), "BIG must be a whole number") {
		t.Errorf("Err() = %v, want N and BIG refused", err)
	}
}
