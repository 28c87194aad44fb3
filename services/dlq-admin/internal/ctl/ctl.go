package ctl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/aegis-payments/aegis/pkg/buildinfo"
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

// OperationsAnnotation is the key of a command's Annotations that lists the
// dlq-admin operations it calls, "METHOD /path" as openapi.yaml writes
// them, comma-separated.
const OperationsAnnotation = "aegisctl/operations"

const rootLong = `aegisctl operates Aegis through dlq-admin's REST API: dead letters and
their replay, replay jobs, the ledger and PSP reconciliations, payouts in
review, four-eyes approvals and outbound endpoints.

The command comes first, flags anywhere after it:
  aegisctl dead-letters list --topic aegis.payouts -o json

Settings: --url or --server (AEGISCTL_URL, config "url"; default
` + defaultURL + `; for endpoints create and update, whose own --url is
the endpoint's, --server or a --url before the command), --token
(AEGISCTL_TOKEN, config "token"), --config (AEGISCTL_CONFIG; default
~/.config/aegisctl/config, "url = …" and "token = …" lines, chmod 600).
The token is never printed.

Exit codes:
  0  ok
  1  error (network, 5xx, an unexpected answer)
  2  usage: bad arguments or flags, a 400 from the API, a bulk action without --yes
  3  401/403: no valid token, or a viewer tried to write
  4  404: not found
  5  refused (409/422): already done, or not allowed now; nothing changed
  6  done but unhealthy: reconciliation not ok, PSP reconciliation failed or
     disagreeing, a replay job failed, was cancelled or had failed letters,
     a resolution refused by the PSP`

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
	// output is table, json or yaml.
	output      string
	interactive bool
}

// structured is true for -o json and -o yaml: the API's answers, not tables.
func (e *env) structured() bool { return e.output != "table" }

// app is one invocation: the global flags' values and what Main passed.
type app struct {
	std     IO
	url     string
	token   string
	config  string
	output  string
	timeout time.Duration
	// ran is set when a command's own code starts: an error before it is
	// cobra's (an unknown command or flag, a wrong number of arguments),
	// a usage error.
	ran bool
}

// Main runs one aegisctl command and returns its exit code.
func Main(ctx context.Context, std IO) int {
	a := &app{std: std}
	root := newRoot(a) //nolint:contextcheck // builds the tree only; each command runs under ExecuteContextC(ctx) (cmd.Context())
	root.SetArgs(globalURL(std.Args))
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	var ue usageError
	if !a.ran && !errors.As(err, &ue) {
		err = usageError{err.Error()}
	}
	switch {
	case errors.As(err, &ue):
		path := "aegisctl"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(std.Stderr, "aegisctl: %v\n(%s --help for usage)\n", err, path)
	case !errors.Is(err, errUnhealthy):
		fmt.Fprintf(std.Stderr, "aegisctl: %v\n", err)
	}
	return exitCode(err)
}

// Command is aegisctl's command tree, for tests and tools that walk it
// (the operations each command declares); Main runs its own.
func Command() *cobra.Command { return newRoot(&app{}) }

// newRoot builds aegisctl's command tree for one invocation.
func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:           "aegisctl",
		Short:         "Operate Aegis's dead letters, payouts in review and outbound endpoints",
		Long:          rootLong,
		Version:       buildinfo.Get().String("aegisctl"),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE:          groupRun,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.url, "url", "", `dlq-admin's address (AEGISCTL_URL, config "url"; default `+defaultURL+`)`)
	pf.StringVar(&a.url, "server", "", "dlq-admin's address, as --url (endpoints create and update take --url for the endpoint's)")
	pf.StringVar(&a.token, "token", "", `a DLQ_ADMIN_TOKENS token (AEGISCTL_TOKEN, config "token")`)
	pf.StringVar(&a.config, "config", "", "config file (AEGISCTL_CONFIG; default ~/.config/aegisctl/config)")
	pf.StringVarP(&a.output, "output", "o", "table", "table, json or yaml: json and yaml print the API's answers as they are")
	pf.DurationVar(&a.timeout, "timeout", 30*time.Second, "per request")
	_ = root.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"table", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp
	})

	root.AddCommand(
		&cobra.Command{
			Use:   "version",
			Short: "Print aegisctl's version, commit and Go toolchain (as --version)",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), buildinfo.Get().String("aegisctl"))
				return err
			},
		},
		a.whoamiCmd(),
		a.deadLettersCmd(),
		a.jobsCmd(),
		a.reconciliationCmd(),
		a.pspReconciliationCmd(),
		a.payoutsCmd(),
		a.resolutionsCmd(),
		a.approvalsCmd(),
		a.usersCmd(),
		a.erasuresCmd(),
		a.endpointsCmd(),
		a.messagesCmd(),
		a.deliveriesCmd(),
	)
	// cobra adds these when it executes; here too, for those who walk the
	// tree. The completion command keeps the writer it finds now.
	if a.std.Stdout != nil {
		root.SetOut(a.std.Stdout)
	}
	if a.std.Stderr != nil {
		root.SetErr(a.std.Stderr)
	}
	root.InitDefaultHelpFlag()
	root.InitDefaultVersionFlag()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	return root
}

// globalURL reads a --url among the flags before the command as dlq-admin's
// address (--server), as aegisctl always has: endpoints create and update
// have a --url of their own (the endpoint's), which would otherwise take it.
func globalURL(args []string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		arg := out[i]
		switch {
		case arg == "--url":
			out[i] = "--server"
			i++
		case strings.HasPrefix(arg, "--url="):
			out[i] = "--server=" + strings.TrimPrefix(arg, "--url=")
		case arg == "--" || !strings.HasPrefix(arg, "-"):
			return out // the command
		case !strings.Contains(arg, "=") && globalTakesValue(arg):
			i++
		}
	}
	return out
}

// globalTakesValue is true for the global flags written with their value
// in the next argument.
func globalTakesValue(flag string) bool {
	switch flag {
	case "--server", "--token", "--config", "--output", "-o", "--timeout":
		return true
	}
	return false
}

// groupRun is the run of a command that only groups others: alone it shows
// its help and fails (exit 2), as does an unknown subcommand.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		if err := cmd.Help(); err != nil {
			return fmt.Errorf("print help: %w", err)
		}
		return usageErrorf("%s needs a command", cmd.CommandPath())
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	cmd.SuggestionsMinimumDistance = 2
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageError{msg}
}

// group is a command of commands.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Args: cobra.ArbitraryArgs, RunE: groupRun}
	c.AddCommand(subs...)
	return c
}

// leaf describes a command that calls the API.
type leaf struct {
	use, short, long, example string
	// ops are the operations it calls, "METHOD /path" as in openapi.yaml.
	ops   []string
	args  cobra.PositionalArgs
	flags func(*pflag.FlagSet)
	run   func(ctx context.Context, e *env, cmd *cobra.Command, args []string) error
}

// command builds l's cobra command: the global settings are read when it
// runs, so help and completion need neither a token nor a server.
func (a *app) command(l leaf) *cobra.Command {
	c := &cobra.Command{
		Use:         l.use,
		Short:       l.short,
		Long:        l.long,
		Example:     l.example,
		Args:        l.args,
		Annotations: map[string]string{OperationsAnnotation: strings.Join(l.ops, ",")},
		RunE: func(cmd *cobra.Command, args []string) error {
			a.ran = true
			e, err := a.env()
			if err != nil {
				return err
			}
			return l.run(cmd.Context(), e, cmd, args)
		},
	}
	if c.Args == nil {
		c.Args = cobra.NoArgs
	}
	if l.flags != nil {
		l.flags(c.Flags())
	}
	return c
}

// env checks the global settings, reads the config file and builds the
// client.
func (a *app) env() (*env, error) {
	switch a.output {
	case "table", "json", "yaml":
	default:
		return nil, usageErrorf("--output must be table, json or yaml, got %q", a.output)
	}
	if a.timeout <= 0 {
		return nil, usageErrorf("--timeout must be positive")
	}
	getenv := a.std.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	file := first(a.config, getenv("AEGISCTL_CONFIG"))
	explicit := file != ""
	if !explicit {
		if home := getenv("HOME"); home != "" {
			file = filepath.Join(home, ".config", "aegisctl", "config")
		}
	}
	conf, err := readConfigFile(file, explicit, a.std.Stderr)
	if err != nil {
		return nil, err
	}
	c, err := newClient(first(a.url, getenv("AEGISCTL_URL"), conf["url"], defaultURL),
		first(a.token, getenv("AEGISCTL_TOKEN"), conf["token"]), a.timeout)
	if err != nil {
		return nil, err
	}
	return &env{c: c, out: a.std.Stdout, errOut: a.std.Stderr, output: a.output, interactive: a.std.Interactive}, nil
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
