// Package ctl is aegisctl: the ops CLI over dlq-admin's REST API
// (services/dlq-admin/openapi.yaml).
//
// It is a thin client on purpose. Every rule — who may replay, what a replay
// writes, redaction, audit — lives in dlq-admin, so the CLI, the web page
// and a curl command can never disagree about what an action does. The CLI
// adds what a person at 3 a.m. and a runbook script need on top: readable
// tables, or the API's own answers as JSON or YAML (-o json|yaml), a dry run
// shown before any bulk action (which needs --yes), a replay job followed
// with a progress bar, and exit codes a script can branch on (see Exit*).
//
// The command tree is github.com/spf13/cobra's, the habit of kubectl and
// most Go CLIs: the command first, flags anywhere after it, -h on every
// command, shell completion (aegisctl completion bash|zsh|fish|powershell).
// Each command that calls the API declares the operations it calls
// (Annotations[OperationsAnnotation]); a test holds them to openapi.yaml so
// that every operation of the API has a command.
//
// The token comes from --token, AEGISCTL_TOKEN or a config file
// (~/.config/aegisctl/config, `token = …` and `url = …` lines), in that order,
// and is never printed.
package ctl
