// Package api is dlq-admin's HTTP surface (docs/design/contract.md,
// "dlq-admin"): the /v1 routes for dead letters, bulk replay jobs, payouts
// in review and their resolutions, four-eyes approvals and the
// reconciliation reports. openapi.yaml beside the service documents every
// route, and a test keeps the two equal. Handlers parse and delegate to
// the areas (deadletter, review, approval, integrity), which never import
// a surface; status codes are chosen in one place, errors.go, where an
// error no area mapped answers 503 naming the part that failed (package
// fault).
//
// Every /v1 route needs a bearer token from DLQ_ADMIN_TOKENS (401 without
// one). Reads need the viewer role; writes (replay, discard, bulk replay,
// cancelling a job, running the reconciliation) sit behind
// requireRole(RoleOperator), which answers 403 to a viewer. The token's name
// is the actor recorded in audit_log. Request bodies are strict JSON
// (unknown fields are refused: a misspelt "dry_run" must not replay for
// real).
//
// Nothing secret leaves through this package: payloads and headers are
// shown through package redact, while the stored row keeps the original for
// replay. Logs carry ids and routes, never payloads or tokens.
package api
