// Package store is dlq-admin's access to the dead_letters table: filtered,
// newest-first listing, one letter by id, depth statistics, the selection
// of open letters for bulk replay, and the claim of letters still to alert
// about. Writing a letter is pkg/dlq's job (Insert is idempotent on the
// letter's origin). Resolving one takes the caller's transaction (Lock,
// MarkReplayed, MarkDiscarded), so that the lock, the outbox row, the new
// status and the audit record (package audit) commit together; package
// replay owns that transaction.
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
// Every letter has a subject (migration 000009): payout_id, provider,
// event_id, user_id, amount, currency and type read from its payload by
// dead_letter_subject, a stored generated column computed once as the row is
// written, so no writer (relay, ingest, the consumers) has to know about it
// and a payload that is not a JSON object simply has the subject {}. The
// list filters on it (payout_id) and on columns the letter already had
// (partition_key for the user, correlation_id, event_type, which is the
// record's event_type header: the PSP's own type on aegis.webhook.pending,
// payout.requested on aegis.transactions), each through its own index; the
// WHERE clause holds only the filters a request sets, so the planner can use
// them. Groups collapse ids and numbers out of the error message so that one
// failure of many payouts is one group.
//
// Every statement is in queries.sql (sqlc, package sqlcdb). The filtered
// ones (the list, the groups, the bulk actions' selections) take their
// conditions through pkg/database's Templated: filter.go chooses them from
// constant conditions, and every value a request sends is a bound
// parameter, so no filter value can become SQL. Driver errors
// are translated here: pgx.ErrNoRows becomes ErrNotFound, and every other
// error is marked as the dead-letter store's (package fault).
package store
