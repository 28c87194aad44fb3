package migrations

import "testing"

// A held migration must be the last one: golang-migrate applies in order,
// so nothing numbered after it could apply while it waits. Once every
// deployment has applied a contract migration it leaves the list, and new
// migrations may follow it.
func TestContractMigrationsAreLast(t *testing.T) {
	versions, err := sourceVersions()
	if err != nil {
		t.Fatal(err)
	}
	contract := map[uint]bool{}
	for _, c := range ContractMigrations() {
		found := false
		for _, v := range versions {
			found = found || v == c.Version
		}
		if !found {
			t.Errorf("contract migration %d has no file", c.Version)
		}
		if c.Why == "" {
			t.Errorf("contract migration %d says not why", c.Version)
		}
		contract[c.Version] = true
	}
	seenContract := false
	for _, v := range versions {
		switch {
		case contract[v]:
			seenContract = true
		case seenContract:
			t.Errorf("migration %d follows a contract migration: it could not apply while that one is held; renumber the contract migration last", v)
		}
	}
}
