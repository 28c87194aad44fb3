// Package api is dlq-admin's HTTP surface (CONTRACT.md, "dlq-admin"): the
// /v1/dead-letters routes for operators, bulk replay jobs and the
// reconciliation report. openapi.yaml beside the service documents every
// route, and a test keeps the two equal. Handlers parse and delegate to the
// store, package replay and package recon; status codes are chosen in one
// place, errors.go.
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
