// Package ctl is aegisctl: the ops CLI over dlq-admin's REST API
// (services/dlq-admin/openapi.yaml).
//
// It is a thin client on purpose. Every rule — who may replay, what a replay
// writes, redaction, audit — lives in dlq-admin, so the CLI, the web page
// and a curl command can never disagree about what an action does. The CLI
// adds what a person at 3 a.m. and a runbook script need on top: readable
// tables or the API's own JSON (--output json), a dry run shown before any
// bulk replay (which needs --yes), a replay job followed with a progress bar,
// and exit codes a script can branch on (see Exit*).
//
// The token comes from --token, AEGISCTL_TOKEN or a config file
// (~/.config/aegisctl/config, `token = …` and `url = …` lines), in that order,
// and is never printed. Only the standard library: a handful of subcommands
// do not need a CLI framework.
package ctl
