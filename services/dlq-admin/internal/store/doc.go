// Package store reads the dead_letters table for dlq-admin: filtered,
// newest-first listing, one letter by id, and depth statistics. Writing a
// letter is pkg/dlq's job (Insert is idempotent on the letter's origin);
// resolving one (replay, discard) will live beside these reads.
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
