package schema

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/aegis-payments/aegis/pkg/event"
)

// settlementsDir is the published version's directory inside files.
const settlementsDir = "settlements/v1"

// base names the embedded files for the compiler; relative $refs between
// them ("envelope.json") resolve against it. Nothing is fetched from it.
const base = "file:///aegis/schema/" + settlementsDir + "/"

//go:embed settlements
var files embed.FS

// SettlementFiles returns the schema files of the current settlements
// version (envelope.json, payout.json, return.json and <type>.json).
func SettlementFiles() fs.FS {
	sub, err := fs.Sub(files, settlementsDir)
	if err != nil { // a constant, valid path into an embedded tree
		return files
	}
	return sub
}

// Validator validates aegis.settlements event bodies. It is safe for
// concurrent use.
type Validator struct {
	byType map[event.Type]*jsonschema.Schema
}

// NewSettlements compiles the settlements schema: one schema per event type
// in event.SettlementTypes.
func NewSettlements() (*Validator, error) {
	return compile(SettlementFiles(), event.SettlementTypes())
}

func compile(fsys fs.FS, types []event.Type) (*Validator, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, fmt.Errorf("list settlement schemas: %w", err)
	}
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read settlement schema %s: %w", name, err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("parse settlement schema %s: %w", name, err)
		}
		if err := c.AddResource(base+name, doc); err != nil {
			return nil, fmt.Errorf("add settlement schema %s: %w", name, err)
		}
	}
	v := &Validator{byType: make(map[event.Type]*jsonschema.Schema, len(types))}
	for _, typ := range types {
		sch, err := c.Compile(base + string(typ) + ".json")
		if err != nil {
			return nil, fmt.Errorf("compile settlement schema %s: %w", typ, err)
		}
		v.byType[typ] = sch
	}
	return v, nil
}

// Validate checks body against the schema of the event type it names. An
// unknown type, or a body that is not a JSON object, is an error too.
func (v *Validator) Validate(body []byte) error {
	var head struct {
		Type event.Type `json:"type"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return fmt.Errorf("settlement event is not a JSON object: %w", err)
	}
	sch, ok := v.byType[head.Type]
	if !ok {
		return fmt.Errorf("settlement event type %q has no schema in version %s", head.Type, event.SettlementSchemaVersion)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("settlement event is not JSON: %w", err)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("settlement event %s does not match schema %s: %s", head.Type,
			path.Join(settlementsDir, string(head.Type)+".json"), oneLine(err))
	}
	return nil
}

// oneLine flattens the validator's multi-line report for logs and dead
// letters.
func oneLine(err error) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", "; ")), " ")
}
