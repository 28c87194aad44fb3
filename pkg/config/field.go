package config

import (
	"errors"
	"fmt"
)

// FieldError is a domain configuration's complaint about one of its fields,
// named by the field's Go path ("Backoff.Base"), never by an environment
// variable: the domain package does not know where the value came from. The
// config layer that filled the field knows, and Env.Check renames the field
// (and every field the problem mentions) to its variable, so an operator
// reads "PSP_BACKOFF_BASE must be positive".
type FieldError struct {
	// Field is the Go path of the field at fault.
	Field  string
	format string
	args   []any
}

// Ref names another field inside a FieldError's problem ("must exceed
// CallTimeout"); it is renamed along with the field.
type Ref string

// Invalid reports that field is wrong: problem is a fmt format whose Ref
// arguments are renamed like the field itself.
//
//	config.Invalid("SettleWindow", "must exceed %s (%s ≤ %s)", config.Ref("CallTimeout"), s, t)
func Invalid(field, problem string, args ...any) error {
	return &FieldError{Field: field, format: problem, args: args}
}

func (e *FieldError) Error() string { return e.render(func(s string) string { return s }) }

// render writes the error with every field path passed through name.
func (e *FieldError) render(name func(string) string) string {
	args := make([]any, len(e.args))
	for i, a := range e.args {
		if r, ok := a.(Ref); ok {
			a = name(string(r))
		}
		args[i] = a
	}
	return name(e.Field) + " " + fmt.Sprintf(e.format, args...)
}

// prefixed returns a copy of e with prefix + "." before every field path.
func (e *FieldError) prefixed(prefix string) *FieldError {
	out := &FieldError{Field: prefix + "." + e.Field, format: e.format, args: make([]any, len(e.args))}
	for i, a := range e.args {
		if r, ok := a.(Ref); ok {
			a = Ref(prefix + "." + string(r))
		}
		out.args[i] = a
	}
	return out
}

// Within puts the field errors of a nested configuration's err under field
// prefix (Backoff → Backoff.Base); other errors stay as they are. nil stays nil.
func Within(prefix string, err error) error {
	if err == nil {
		return nil
	}
	errs := leaves(err)
	for i, e := range errs {
		var fe *FieldError
		if errors.As(e, &fe) {
			errs[i] = fe.prefixed(prefix)
		}
	}
	return errors.Join(errs...)
}

// leaves flattens errors.Join trees.
func leaves(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}

// Check records every problem of err, a domain configuration's Validate
// result: a FieldError's fields are named by their variable in vars (Go path
// → variable name). A field vars does not map keeps its Go path, which reads
// as a bug to fix here, and an error that is no FieldError is recorded as is.
func (e *Env) Check(err error, vars map[string]string) {
	if err == nil {
		return
	}
	name := func(field string) string {
		if v, ok := vars[field]; ok {
			return v
		}
		return field
	}
	for _, l := range leaves(err) {
		var fe *FieldError
		if errors.As(l, &fe) {
			e.errs = append(e.errs, errors.New(fe.render(name)))
			continue
		}
		e.errs = append(e.errs, l)
	}
}
