// Package sqlcheck finds SQL written outside the queries.sql files (and the
// sqlc code generated from them) and payout-state words written outside
// pkg/payoutstate, in the non-test Go code of services/ and pkg/ and in
// their queries.sql files. A header row (a call whose string arguments are
// all upper-case words, some not states: a FAILED column) is not a state. Its test runs in every `make test`: SQL in a
// string literal, or a payout state spelled anywhere but its package,
// fails the build unless the file is on the test's allowlist with its
// reason.
package sqlcheck
