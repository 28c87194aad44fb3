// Package fault marks an error with what failed, so that an operator who
// gets a 503 reads which part of dlq-admin did not answer ("the audit log",
// "the approvals") instead of one message for everything.
//
// Each area marks the errors of its exported calls once (Mark, deferred at
// the top of the call); an error marked by a deeper area keeps that mark,
// because the deeper area is what failed: an audit write that fails inside
// a replay is the audit log's failure, not the dead-letter store's. The
// mark changes neither the error's text nor what errors.Is and errors.As
// find in it, so the sentinel errors the API maps to 4xx answers and every
// log line read the same with or without it.
package fault
