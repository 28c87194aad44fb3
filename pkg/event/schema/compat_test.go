package schema

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// released is the copy of the settlements schema as last published. It
// changes only when a new schema is released, by copying settlements/v1
// over it once this test passes.
const released = "testdata/released/settlements/v1"

// TestSettlementSchemaStaysCompatible fails when settlements/v1 would break
// a consumer written against the released v1: such a change belongs in a
// v2 directory.
func TestSettlementSchemaStaysCompatible(t *testing.T) {
	t.Parallel()
	for _, p := range incompatibilities(t, os.DirFS(released), SettlementFiles()) {
		t.Error(p)
	}
}

// The check itself must be able to fail: each edit below breaks a consumer
// of the released schema, and the last ones do not.
func TestCompatibilityCheckCatchesBreakingChanges(t *testing.T) {
	t.Parallel()
	edit := func(file string, fn func(doc map[string]any)) fs.FS {
		m := fstest.MapFS{}
		err := fs.WalkDir(SettlementFiles(), ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(SettlementFiles(), p)
			if err != nil {
				return err
			}
			if p == file {
				var doc map[string]any
				if err := json.Unmarshal(b, &doc); err != nil {
					return err
				}
				fn(doc)
				if b, err = json.Marshal(doc); err != nil {
					return err
				}
			}
			m[p] = &fstest.MapFile{Data: b}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	props := func(doc map[string]any) map[string]any { return doc["properties"].(map[string]any) }
	prop := func(doc map[string]any, name string) map[string]any { return props(doc)[name].(map[string]any) }
	without := func(list []any, v string) []any {
		return slices.DeleteFunc(slices.Clone(list), func(x any) bool { return x == v })
	}
	for name, tc := range map[string]struct {
		fsys     fs.FS
		breaking bool
	}{
		"required field removed": {edit("envelope.json", func(d map[string]any) {
			d["required"] = without(d["required"].([]any), "amount")
		}), true},
		"required field retyped": {edit("envelope.json", func(d map[string]any) { prop(d, "amount")["type"] = "string" }), true},
		"provider enum narrowed": {edit("envelope.json", func(d map[string]any) { prop(d, "provider")["enum"] = []any{"stripe"} }), true},
		"event type dropped from the enum": {edit("envelope.json", func(d map[string]any) {
			prop(d, "type")["enum"] = without(prop(d, "type")["enum"].([]any), "dispute.lost")
		}), true},
		"optional field retyped":       {edit("return.json", func(d map[string]any) { prop(d, "owed")["type"] = "string" }), true},
		"status const changed":         {edit("payout.failed.json", func(d map[string]any) { prop(d, "status")["const"] = "FAILED" }), true},
		"free field given an enum":     {edit("payout.json", func(d map[string]any) { prop(d, "error")["enum"] = []any{"x"} }), true},
		"minimum raised":               {edit("envelope.json", func(d map[string]any) { prop(d, "amount")["minimum"] = 100 }), true},
		"format changed":               {edit("envelope.json", func(d map[string]any) { prop(d, "occurred_at")["format"] = "date" }), true},
		"optional field added":         {edit("return.json", func(d map[string]any) { props(d)["note"] = map[string]any{"type": "string"} }), false},
		"provider enum widened":        {edit("envelope.json", func(d map[string]any) { prop(d, "provider")["enum"] = []any{"stripe", "paystack", "adyen"} }), false},
		"optional field made required": {edit("payout.json", func(d map[string]any) { d["required"] = append(d["required"].([]any), "psp_reference") }), false},
		"description reworded":         {edit("payout.json", func(d map[string]any) { d["description"] = "reworded" }), false},
	} {
		got := incompatibilities(t, os.DirFS(released), tc.fsys)
		if tc.breaking && len(got) == 0 {
			t.Errorf("%s: not reported as breaking", name)
		}
		if !tc.breaking && len(got) > 0 {
			t.Errorf("%s: reported as breaking: %v", name, got)
		}
	}
	m := edit("", nil).(fstest.MapFS)
	delete(m, "dispute.lost.json")
	if got := incompatibilities(t, os.DirFS(released), m); len(got) == 0 {
		t.Error("a dropped event type's schema file was not reported")
	}
}

// field is what a consumer may rely on about one property, merged over the
// allOf chain of an event type's schema.
type field struct {
	types   []string
	values  []string // allowed values from enum/const; nil: any
	format  string
	pattern string
	min     *float64
	minLen  *float64
	maxLen  *float64
}

type shape struct {
	required map[string]bool
	fields   map[string]*field
}

// incompatibilities lists what in current would break a consumer of
// published: a file (event type) gone, a required field no longer required,
// a field retyped, its allowed values, format or pattern narrowed or
// changed, its bounds tightened.
func incompatibilities(t *testing.T, published, current fs.FS) []string {
	t.Helper()
	names, err := fs.Glob(published, "*.json")
	if err != nil || len(names) == 0 {
		t.Fatalf("no published schema files (%v)", err)
	}
	var out []string
	for _, name := range names {
		old := flatten(t, published, name)
		if _, err := fs.Stat(current, name); err != nil {
			out = append(out, name+": removed")
			continue
		}
		cur := flatten(t, current, name)
		for f := range old.required {
			if !cur.required[f] {
				out = append(out, fmt.Sprintf("%s: required field %q no longer required", name, f))
			}
		}
		for f, o := range old.fields {
			c, ok := cur.fields[f]
			if !ok {
				continue // an optional field dropped: consumers tolerate its absence
			}
			out = append(out, compareField(name+": "+f, o, c)...)
		}
	}
	return out
}

func compareField(at string, o, c *field) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, at+": "+fmt.Sprintf(format, args...)) }
	if !slices.Equal(o.types, c.types) {
		bad("type %v became %v", o.types, c.types)
	}
	switch {
	case c.values == nil:
	case o.values == nil:
		bad("any value became only %v", c.values)
	default:
		for _, v := range o.values {
			if !slices.Contains(c.values, v) {
				bad("value %q no longer allowed", v)
			}
		}
	}
	if o.format != c.format {
		bad("format %q became %q", o.format, c.format)
	}
	if c.pattern != "" && o.pattern != c.pattern {
		bad("pattern %q became %q", o.pattern, c.pattern)
	}
	if tighter(o.min, c.min, 1) || tighter(o.minLen, c.minLen, 1) || tighter(o.maxLen, c.maxLen, -1) {
		bad("bounds tightened")
	}
	return out
}

// tighter reports a lower (dir 1) or upper (dir -1) bound that admits less
// than before.
func tighter(o, c *float64, dir float64) bool {
	switch {
	case c == nil:
		return false
	case o == nil:
		return true
	default:
		return (*c-*o)*dir > 0
	}
}

func flatten(t *testing.T, fsys fs.FS, name string) shape {
	t.Helper()
	s := shape{required: map[string]bool{}, fields: map[string]*field{}}
	var walk func(name string, depth int)
	walk = func(name string, depth int) {
		if depth > 8 {
			t.Fatalf("%s: $ref chain too deep", name)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		var doc struct {
			AllOf      []map[string]any          `json:"allOf"`
			Required   []string                  `json:"required"`
			Properties map[string]map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		for _, sub := range doc.AllOf {
			ref, ok := sub["$ref"].(string)
			if !ok || strings.Contains(ref, "#") || strings.Contains(ref, ":") {
				t.Fatalf("%s: allOf entries must be $refs to sibling files, got %v", name, sub)
			}
			walk(path.Clean(ref), depth+1)
		}
		for _, r := range doc.Required {
			s.required[r] = true
		}
		for p, def := range doc.Properties {
			f := s.fields[p]
			if f == nil {
				f = &field{}
				s.fields[p] = f
			}
			merge(f, def)
		}
	}
	walk(name, 0)
	return s
}

func merge(f *field, def map[string]any) {
	if typ, ok := def["type"].(string); ok && f.types == nil {
		f.types = []string{typ}
	}
	var vals []string
	restricted := false
	if c, ok := def["const"]; ok {
		vals, restricted = []string{fmt.Sprint(c)}, true
	}
	if e, ok := def["enum"].([]any); ok {
		restricted = true
		for _, v := range e {
			vals = append(vals, fmt.Sprint(v))
		}
	}
	if restricted {
		if f.values == nil {
			f.values = vals
		} else {
			f.values = slices.DeleteFunc(f.values, func(v string) bool { return !slices.Contains(vals, v) })
		}
		if f.values == nil {
			f.values = []string{}
		}
	}
	if v, ok := def["format"].(string); ok {
		f.format = v
	}
	if v, ok := def["pattern"].(string); ok {
		f.pattern = v
	}
	num := func(k string) *float64 {
		if v, ok := def[k].(float64); ok {
			return &v
		}
		return nil
	}
	if v := num("minimum"); v != nil {
		f.min = v
	}
	if v := num("minLength"); v != nil {
		f.minLen = v
	}
	if v := num("maxLength"); v != nil {
		f.maxLen = v
	}
}
