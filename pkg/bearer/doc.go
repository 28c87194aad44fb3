// Package bearer authenticates "Authorization: Bearer <token>" requests
// against tokens configured as name:token or name:role:token lists
// (API_TOKENS, DLQ_ADMIN_TOKENS).
//
// Tokens are compared in constant time against every configured token, so
// neither the match position nor a prefix match leaks through timing. The
// token's name, never its secret, is what logs and the audit log record.
package bearer
