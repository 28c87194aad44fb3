package schema

import (
	"encoding/json"
	"io/fs"
	"slices"
	"testing"

	"github.com/aegis-payments/aegis/pkg/event"
)

// The envelope schema's type enum and event.SettlementTypes name the same
// types: there is no SQL CHECK on event_type, so this is where the typed list
// meets the published contract. Each type also has its own schema file.
func TestSettlementTypesMatchTheSchemaEnum(t *testing.T) {
	t.Parallel()
	b, err := fs.ReadFile(SettlementFiles(), "envelope.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			Type struct {
				Enum []string `json:"enum"`
			} `json:"type"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, typ := range event.SettlementTypes() {
		want = append(want, string(typ))
		if _, err := fs.Stat(SettlementFiles(), string(typ)+".json"); err != nil {
			t.Errorf("settlement type %s has no schema file: %v", typ, err)
		}
	}
	got := slices.Clone(doc.Properties.Type.Enum)
	slices.Sort(got)
	slices.Sort(want)
	if len(got) == 0 || !slices.Equal(got, want) {
		t.Errorf("envelope.json type enum is %q, event.SettlementTypes() is %q", got, want)
	}
}
