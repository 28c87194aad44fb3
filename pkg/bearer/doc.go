// Package bearer authenticates "Authorization: Bearer <token>" requests
// against tokens configured as name:token or name:role:token lists
// (API_TOKENS, DLQ_ADMIN_TOKENS).
//
// A name may be listed with several secrets: that is how a token is rotated
// (deploy old and new, move the clients over, drop the old). Everything
// keyed on the name (Idempotency-Keys, scopes, the audit log) stays the same
// across a rotation. A name keeps one role, and a secret belongs to one name,
// so a presented token always identifies exactly one credential.
//
// Tokens are compared in constant time against every configured token, so
// neither the match position nor a prefix match leaks through timing. The
// token's name, never its secret, is what logs and the audit log record.
package bearer
