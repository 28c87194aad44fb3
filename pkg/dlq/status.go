package dlq

import "slices"

// Status is where a stored dead letter stands (dead_letters.status).
type Status string

// Statuses of a dead letter.
const (
	// StatusOpen: waiting for a person to replay or discard it.
	StatusOpen Status = "open"
	// StatusReplayed: sent back through the pipeline (or found already
	// applied) by an operator.
	StatusReplayed Status = "replayed"
	// StatusDiscarded: closed by an operator with a reason.
	StatusDiscarded Status = "discarded"
)

// Statuses is every status, in the order of the schema's CHECK constraint.
func Statuses() []Status { return []Status{StatusOpen, StatusReplayed, StatusDiscarded} }

// ValidStatus reports whether s names a status.
func ValidStatus(s string) bool { return slices.Contains(Statuses(), Status(s)) }

// Sources is every source of a dead letter (dead_letters.source), in the
// order of the schema's CHECK constraint.
func Sources() []string { return []string{SourceIngest, SourceRelay, SourceConsumer, SourceSweeper} }
