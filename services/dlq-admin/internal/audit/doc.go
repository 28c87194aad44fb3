// Package audit writes audit_log: one row for every operator action
// (replay, discard, resolve, approve, reconcile, ...), in the transaction
// of the action it records, so that the log never shows an action that did
// not happen nor misses one that did.
//
// The actions and target types are the owners' words (each area declares
// the ones it writes); this package only writes the row. A failure to write
// it is marked as the audit log's (package fault), so the operator reads
// that the audit log, not the area whose action it was, is unavailable.
package audit
