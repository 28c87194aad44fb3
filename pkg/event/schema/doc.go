// Package schema holds the versioned JSON Schema of the events Aegis
// publishes on aegis.settlements (settlements/v1/*.json, one file per event
// type plus the envelope and the payout and return shapes they extend) and
// validates event bodies against it.
//
// The schema is the contract with every consumer of aegis.settlements and of
// the outbound settlement webhooks: the Go types in package event produce
// it (a test checks every type against its file), outbound delivery
// (outbox-relay) refuses to deliver a body that does not match it, and a compatibility test
// compares the files with testdata/released, the copy last published, so a
// change that would break a consumer of the published version (a required
// field removed or retyped, an enum narrowed, a type dropped) fails the
// build instead of reaching a receiver. Such a change is a new version
// directory, never an edit.
//
// The validator is santhosh-tekuri/jsonschema/v6: maintained, pure Go,
// passes the official JSON-Schema-Test-Suite for draft 2020-12 and asserts
// formats (date-time, uuid) when asked.
package schema
