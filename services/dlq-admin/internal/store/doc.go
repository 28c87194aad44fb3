// Package store is dlq-admin's access to the dead_letters and audit_log
// tables: filtered, newest-first listing, one letter by id, depth
// statistics, the selection of open letters for bulk replay, and the
// claim of letters still to alert about. Writing a letter is pkg/dlq's job
// (Insert is idempotent on the letter's origin). Resolving one takes the
// caller's transaction (Lock, MarkReplayed, MarkDiscarded, Audit), so that
// the lock, the outbox row, the new status and the audit record commit
// together; package replay owns that transaction.
//
// Listing pages by keyset on id, never by OFFSET: a page holds the rows with
// id below the previous page's last id, so rows stored while an operator
// pages through (they always get higher ids) never shift or repeat later
// pages. The cursor is opaque to clients (base64 of that last id) so its
// shape can change without breaking them. One caveat is inherent to ids from
// a sequence: a row whose id was taken before a page was read but whose
// transaction committed after it can be missed by that one walk; the next
// walk shows it.
//
// All SQL is in queries.go. Driver errors are translated here: pgx.ErrNoRows
// becomes ErrNotFound.
package store
