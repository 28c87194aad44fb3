package ctl

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// IO is what Main reads and writes: os.Args[1:], os.Stdout, … in main, buffers
// and a map in tests.
type IO struct {
	Args   []string
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Interactive is true when Stderr is a terminal: progress redraws one
	// line instead of printing one per change.
	Interactive bool
}

const defaultURL = "http://127.0.0.1:8083"

const usage = `aegisctl — operate Aegis's dead-letter store (dlq-admin's REST API)

Usage: aegisctl [global flags] <command> [flags] [args]

Dead letters:
  dead-letters list   [--topic T] [--status open|replayed|discarded] [--error-class C]
                      [--since RFC3339] [--until RFC3339] [--limit N] [--all]
                      [--payout-id P] [--user U] [--correlation-id C] [--event-type E]
  dead-letters show ID
  dead-letters stats
  dead-letters groups [the list's filters]   open letters by error class and message, with counts
  dead-letters replay ID [--reason R]
  dead-letters discard ID --reason R
  dead-letters bulk-replay --max N [--topic T] [--error-class C] [--since ..] [--until ..]
                      [--payout-id P] [--user U] [--correlation-id C] [--event-type E]
                      [--reason R] [--dry-run | --yes] [--follow]
      without --yes only the dry run is shown (exit 2): the count comes first.
Replay jobs:
  jobs list [--limit N]
  jobs show ID
  jobs follow ID [--interval D]      progress until the job ends
  jobs cancel ID
Reconciliation:
  reconciliation show
  reconciliation run
Payouts in review:
  payouts list [--status NEEDS_REVIEW] [--limit N] [--cursor C] [--all]   NEEDS_REVIEW first, then oldest
  payouts resolve PAYOUT_ID --paid|--failed --reason R --evidence PSP_OBJECT_ID
  payouts otp PAYOUT_ID --otp CODE   enter the OTP Paystack sent for the payout's transfer (status otp);
                                     one use, expires with the transfer (30 minutes)
  resolutions show ID                exit 6 when the worker refused it (the PSP disagreed)
Four-eyes approvals (REQUIRE_SECOND_APPROVER):
  approvals list [--status pending|approved|rejected]
  approvals approve ID [--reason R]  a different operator than the requester
  approvals reject ID --reason R
Outbound endpoints (docs/design/outbound.md):
  endpoints list                     with health, pending deliveries and the oldest one
  endpoints get ENDPOINT_ID
  endpoints create --url URL [--description D] [--event-types payout.*,refund.posted] [--rate-limit N]
                   [--legacy-secret S]           prints the new secret (once)
  endpoints update ENDPOINT_ID [--url U] [--description D] [--event-types T,…] [--rate-limit N|none]
                   [--legacy-secret S|none] [--reason R]
  endpoints delete ENDPOINT_ID [--reason R]
  endpoints disable ENDPOINT_ID --reason R
  endpoints enable ENDPOINT_ID [--reason R]
  endpoints secret ENDPOINT_ID       (operator; audited)
  endpoints rotate-secret ENDPOINT_ID [--secret whsec_…] [--reason R]
                                     the old secret signs too for OUTBOUND_ROTATION_OVERLAP
  endpoints recover ENDPOINT_ID --since RFC3339 [--reason R]
                                     re-sends what it missed since then, throttled
  endpoints deliveries ENDPOINT_ID [--state pending|succeeded|failed] [--limit N] [--before-id N]
  endpoints attempts ENDPOINT_ID [--limit N] [--before-id N]
  messages list [--user-id U] [--event-type T] [--event-id E] [--limit N] [--before-id N]
  messages get MESSAGE_ID            its body, each delivery and every attempt
  messages resend MESSAGE_ID --endpoint ENDPOINT_ID [--reason R]
  deliveries resend DELIVERY_ID [--reason R]   a failed or pending delivery, due now

Global flags (before the command):
  --url URL        dlq-admin's address (AEGISCTL_URL, config "url"; default ` + defaultURL + `)
  --token TOKEN    a DLQ_ADMIN_TOKENS token (AEGISCTL_TOKEN, config "token")
  --config FILE    config file (AEGISCTL_CONFIG; default ~/.config/aegisctl/config)
  --output table|json   json prints the API's answers as they are (default table)
  --timeout D      per request (default 30s)

Exit codes: 0 ok, 1 error, 2 usage or 400, 3 401/403, 4 not found,
5 refused (409/422, nothing changed), 6 done but unhealthy (reconciliation
not ok; a replay job failed, was cancelled or had failed letters).
`

// usageError is a mistake in the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// errUnhealthy marks an answer that worked but reports a problem.
var errUnhealthy = errors.New("unhealthy")

// env is one invocation's settings and outputs.
type env struct {
	c           *client
	out, errOut io.Writer
	json        bool
	interactive bool
}

// Main runs one aegisctl command and returns its exit code.
func Main(ctx context.Context, std IO) int {
	err := run(ctx, std)
	if err == nil {
		return ExitOK
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(std.Stderr, "aegisctl: %v\n(aegisctl help for usage)\n", err)
	} else if !errors.Is(err, errUnhealthy) {
		fmt.Fprintf(std.Stderr, "aegisctl: %v\n", err)
	}
	return exitCode(err)
}

func run(ctx context.Context, std IO) error {
	fs := flag.NewFlagSet("aegisctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	urlFlag := fs.String("url", "", "")
	token := fs.String("token", "", "")
	configFile := fs.String("config", "", "")
	output := fs.String("output", "table", "")
	timeout := fs.Duration("timeout", 30*time.Second, "")
	if err := fs.Parse(std.Args); err != nil {
		return usageErrorf("%v", err)
	}
	args := fs.Args()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(std.Stdout, usage)
		if len(args) == 0 {
			return usageErrorf("no command")
		}
		return nil
	}
	if *output != "table" && *output != "json" {
		return usageErrorf("--output must be table or json, got %q", *output)
	}
	if *timeout <= 0 {
		return usageErrorf("--timeout must be positive")
	}

	file := first(*configFile, std.Getenv("AEGISCTL_CONFIG"))
	explicit := file != ""
	if !explicit {
		if home := std.Getenv("HOME"); home != "" {
			file = filepath.Join(home, ".config", "aegisctl", "config")
		}
	}
	conf, err := readConfigFile(file, explicit, std.Stderr)
	if err != nil {
		return err
	}
	c, err := newClient(first(*urlFlag, std.Getenv("AEGISCTL_URL"), conf["url"], defaultURL),
		first(*token, std.Getenv("AEGISCTL_TOKEN"), conf["token"]), *timeout)
	if err != nil {
		return err
	}
	e := &env{c: c, out: std.Stdout, errOut: std.Stderr, json: *output == "json", interactive: std.Interactive}

	cmd, rest := args[0], args[1:]
	sub := ""
	if len(rest) > 0 {
		sub, rest = rest[0], rest[1:]
	}
	switch cmd + " " + sub {
	case "dead-letters list":
		return e.listLetters(ctx, rest)
	case "dead-letters show":
		return e.showLetter(ctx, rest)
	case "dead-letters stats":
		return e.stats(ctx, rest)
	case "dead-letters groups":
		return e.groups(ctx, rest)
	case "dead-letters replay":
		return e.replay(ctx, rest)
	case "dead-letters discard":
		return e.discard(ctx, rest)
	case "dead-letters bulk-replay":
		return e.bulkReplay(ctx, rest)
	case "jobs list":
		return e.listJobs(ctx, rest)
	case "jobs show":
		return e.showJob(ctx, rest)
	case "jobs follow":
		return e.followJobCmd(ctx, rest)
	case "jobs cancel":
		return e.cancelJob(ctx, rest)
	case "reconciliation show":
		return e.reconciliation(ctx, rest, false)
	case "reconciliation run":
		return e.reconciliation(ctx, rest, true)
	case "payouts list":
		return e.listPayouts(ctx, rest)
	case "payouts resolve":
		return e.resolvePayout(ctx, rest)
	case "payouts otp":
		return e.payoutOTP(ctx, rest)
	case "resolutions show":
		return e.showResolution(ctx, rest)
	case "approvals list":
		return e.listApprovals(ctx, rest)
	case "approvals approve":
		return e.decideApproval(ctx, rest, true)
	case "approvals reject":
		return e.decideApproval(ctx, rest, false)
	case "deliveries resend":
		return e.resendDelivery(ctx, rest)
	}
	switch cmd {
	case "endpoints":
		return e.endpoints(ctx, sub, rest)
	case "messages":
		return e.messages(ctx, sub, rest)
	}
	return usageErrorf("unknown command %q", strings.TrimSpace(cmd+" "+sub))
}

// readConfigFile reads `key = value` lines (# comments). A missing default
// file is no error; a missing explicit one is. A file others can read gets
// a warning: it holds a token.
func readConfigFile(path string, explicit bool, warn io.Writer) (map[string]string, error) {
	conf := map[string]string{}
	if path == "" {
		return conf, nil
	}
	f, err := os.Open(path)
	if err != nil {
		if !explicit && errors.Is(err, os.ErrNotExist) {
			return conf, nil
		}
		return nil, usageErrorf("config file: %v", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().Perm()&0o077 != 0 {
		fmt.Fprintf(warn, "aegisctl: warning: %s is readable by others (mode %v); it holds a token: chmod 600 it\n", path, fi.Mode().Perm())
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !ok || (k != "url" && k != "token") {
			return nil, usageErrorf("config file %s line %d: want `url = …` or `token = …`", path, n)
		}
		conf[k] = strings.TrimSpace(v)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return conf, nil
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
