package ctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/aegis-payments/aegis/pkg/buildinfo"
	"github.com/aegis-payments/aegis/pkg/openapitest"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/ctl"
)

// leaves are the commands that call the API, by path without "aegisctl ".
func leaves(t *testing.T) map[string]*cobra.Command {
	t.Helper()
	out := map[string]*cobra.Command{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if _, ok := c.Annotations[ctl.OperationsAnnotation]; ok {
			out[strings.TrimPrefix(c.CommandPath(), "aegisctl ")] = c
		}
	}
	walk(ctl.Command())
	require.NotEmpty(t, out)
	return out
}

func declared(c *cobra.Command) []string {
	v := c.Annotations[ctl.OperationsAnnotation]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// TestEveryAPIOperationHasACommand walks openapi.yaml: every operation of
// dlq-admin's API is reachable from aegisctl, and every operation a command
// declares is one the API has.
func TestEveryAPIOperationHasACommand(t *testing.T) {
	t.Parallel()
	documented := openapitest.Documented(t, "../../openapi.yaml")
	covered := map[string][]string{}
	for path, c := range leaves(t) {
		ops := declared(c)
		require.NotEmpty(t, ops, "%s declares no operation", path)
		for _, op := range ops {
			_, ok := documented[op]
			require.True(t, ok, "%s declares %q, which openapi.yaml does not have", path, op)
			covered[op] = append(covered[op], path)
		}
	}
	var missing []string
	for op := range documented {
		if len(covered[op]) == 0 {
			missing = append(missing, op)
		}
	}
	sort.Strings(missing)
	require.Empty(t, missing, "dlq-admin operations no aegisctl command calls")
}

// samples run every command against a stand-in of the API that records
// what it is asked; each command's samples together must ask exactly what
// it declares.
var samples = map[string][][]string{
	"whoami":                           {{"whoami"}},
	"dead-letters list":                {{"dead-letters", "list", "--topic", "t"}},
	"dead-letters show":                {{"dead-letters", "show", "1"}},
	"dead-letters stats":               {{"dead-letters", "stats"}},
	"dead-letters groups":              {{"dead-letters", "groups"}},
	"dead-letters replay":              {{"dead-letters", "replay", "1"}},
	"dead-letters discard":             {{"dead-letters", "discard", "1", "--reason", "r"}},
	"dead-letters bulk-replay":         {{"dead-letters", "bulk-replay", "--max", "1", "--yes"}},
	"dead-letters bulk-discard":        {{"dead-letters", "bulk-discard", "--ids", "1,2", "--reason", "r", "--yes"}},
	"jobs list":                        {{"jobs", "list"}},
	"jobs show":                        {{"jobs", "show", "1"}},
	"jobs follow":                      {{"jobs", "follow", "1"}},
	"jobs letters":                     {{"jobs", "letters", "1"}},
	"jobs cancel":                      {{"jobs", "cancel", "1"}},
	"reconciliation show":              {{"reconciliation", "show"}},
	"reconciliation run":               {{"reconciliation", "run"}},
	"psp-reconciliation show":          {{"psp-reconciliation", "show"}, {"psp-reconciliation", "show", "1"}},
	"psp-reconciliation disagreements": {{"psp-reconciliation", "disagreements"}},
	"psp-reconciliation run":           {{"psp-reconciliation", "run", "--follow", "--interval", "100ms"}},
	"payouts list":                     {{"payouts", "list"}},
	"payouts show":                     {{"payouts", "show", "p1"}},
	"payouts resolve":                  {{"payouts", "resolve", "p1", "--paid", "--reason", "r", "--evidence", "po_1"}},
	"payouts otp":                      {{"payouts", "otp", "p1", "--otp", "123456"}},
	"resolutions show":                 {{"resolutions", "show", "r1"}},
	"resolutions list":                 {{"resolutions", "list", "--payout-id", "p1"}},
	"approvals list":                   {{"approvals", "list"}},
	"approvals show":                   {{"approvals", "show", "1"}},
	"approvals approve":                {{"approvals", "approve", "1"}},
	"approvals reject":                 {{"approvals", "reject", "1", "--reason", "r"}},
	"users erase":                      {{"users", "erase", "u1", "--reason", "ticket 1"}},
	"erasures list":                    {{"erasures", "list"}},
	"erasures show":                    {{"erasures", "show", "1"}},
	"endpoints list":                   {{"endpoints", "list"}},
	"endpoints get":                    {{"endpoints", "get", "e1"}},
	"endpoints create":                 {{"endpoints", "create", "--url", "https://x.example.com"}},
	"endpoints update":                 {{"endpoints", "update", "e1", "--description", "d"}},
	"endpoints delete":                 {{"endpoints", "delete", "e1"}},
	"endpoints disable":                {{"endpoints", "disable", "e1", "--reason", "r"}},
	"endpoints enable":                 {{"endpoints", "enable", "e1"}},
	"endpoints secret":                 {{"endpoints", "secret", "e1"}},
	"endpoints rotate-secret":          {{"endpoints", "rotate-secret", "e1"}},
	"endpoints recover":                {{"endpoints", "recover", "e1", "--since", "2026-11-01T00:00:00Z"}},
	"endpoints deliveries":             {{"endpoints", "deliveries", "e1"}},
	"endpoints attempts":               {{"endpoints", "attempts", "e1"}},
	"messages list":                    {{"messages", "list"}},
	"messages get":                     {{"messages", "get", "1"}},
	"messages resend":                  {{"messages", "resend", "1", "--endpoint", "e1"}},
	"deliveries resend":                {{"deliveries", "resend", "1"}},
}

// TestEachCommandCallsWhatItDeclares runs every command against a stand-in
// that answers each documented route: a removed command fails its sample,
// a command calling what it does not declare (or declaring what it does not
// call) fails too, and so does a command without a sample here.
func TestEachCommandCallsWhatItDeclares(t *testing.T) {
	t.Parallel()
	documented := openapitest.Documented(t, "../../openapi.yaml")
	type route struct {
		op string
		re *regexp.Regexp
	}
	var routes []route
	for op := range documented {
		method, path, _ := strings.Cut(op, " ")
		re := regexp.MustCompile("^" + method + " " + regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllString(regexp.QuoteMeta(path), `[^/]+`) + "$")
		routes = append(routes, route{op, re})
	}
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Method + " " + r.URL.Path
		for _, rt := range routes {
			// A literal route (/v1/dead-letters/stats) wins over a
			// parameter ({id}); both match only when the id is a word.
			if rt.re.MatchString(key) && (!strings.Contains(rt.op, "{") || !literal(documented, key)) {
				mu.Lock()
				asked = append(asked, rt.op)
				mu.Unlock()
				// One answer that every command can read: finished and
				// healthy (a PSP run is requested, then succeeded), one
				// letter to act on.
				status := "done"
				switch {
				case rt.op == "POST /v1/psp-reconciliation":
					status = "requested"
				case strings.Contains(rt.op, "psp-reconciliation"):
					status = "succeeded"
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"run_id":1,"status":"`+status+`","ok":true,"matched":1,"would_replay":1,
					"discarded":1,"ids":[1],"max":1,"name":"ops","role":"operator","items":[]}`)
				return
			}
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)

	cmds := leaves(t)
	for path := range cmds {
		_, ok := samples[path]
		require.True(t, ok, "no sample invocation for %q: add one to samples", path)
	}
	for path, invocations := range samples {
		c, ok := cmds[path]
		require.True(t, ok, "%q is not a command", path)
		mu.Lock()
		asked = nil
		mu.Unlock()
		for _, args := range invocations {
			r := cli(t, srv.URL, operatorToken, args...)
			require.Equal(t, ctl.ExitOK, r.code, "%v: %s%s", args, r.stdout, r.stderr)
		}
		mu.Lock()
		got := slices.Compact(slices.Sorted(slices.Values(asked)))
		mu.Unlock()
		want := slices.Sorted(slices.Values(declared(c)))
		require.Equal(t, want, got, "%s: the operations it called against those it declares", path)
	}
}

// literal is true when key is a documented route with no parameter.
func literal(documented map[string]openapitest.Operation, key string) bool {
	_, ok := documented[key]
	return ok
}

// TestHelpVersionAndCompletionNeedNoServer: -h on every command prints its
// help and exits 0, --version and version print buildinfo's line, cobra's
// completion scripts come out, all without a token or a server.
func TestHelpVersionAndCompletionNeedNoServer(t *testing.T) {
	t.Parallel()
	run := func(args ...string) result {
		var out, errOut bytes.Buffer
		code := ctl.Main(context.Background(), ctl.IO{Args: args, Stdout: &out, Stderr: &errOut,
			Getenv: func(string) string { return "" }})
		return result{code, out.String(), errOut.String()}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.Fields(c.CommandPath())[1:]
		for _, h := range []string{"-h", "--help"} {
			r := run(append(slices.Clone(path), h)...)
			require.Equal(t, ctl.ExitOK, r.code, "%v %s: %s", path, h, r.stderr)
			require.Contains(t, r.stdout, "Usage:", "%v %s", path, h)
			require.Empty(t, r.stderr)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(ctl.Command())

	// The help a person reads first documents the exit codes.
	r := run("--help")
	require.Contains(t, r.stdout, "5  refused (409/422)")
	require.Contains(t, r.stdout, "6  done but unhealthy")
	r = run("help", "dead-letters", "bulk-replay")
	require.Equal(t, ctl.ExitOK, r.code)
	require.Contains(t, r.stdout, "--yes")

	line := buildinfo.Get().String("aegisctl") + "\n"
	for _, args := range [][]string{{"--version"}, {"version"}} {
		r := run(args...)
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Equal(t, line, r.stdout, "%v", args)
	}

	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		r := run("completion", shell)
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		require.Contains(t, r.stdout, "aegisctl", shell)
	}
	// Completion of -o's values, as a shell asks for them.
	r = run("__complete", "dead-letters", "list", "-o", "")
	require.Equal(t, ctl.ExitOK, r.code, r.stderr)
	require.Equal(t, []string{"table", "json", "yaml"}, strings.Fields(r.stdout)[:3])

	// Usage errors: exit 2, a hint on stderr.
	for _, args := range [][]string{
		{}, {"frobnicate"}, {"dead-letters"}, {"payouts", "frobnicate"}, {"dead-letters", "list", "--bogus"},
		{"dead-letters", "show"}, {"dead-letters", "show", "1", "2"}, {"jobs", "list", "extra"},
	} {
		r := run(args...)
		require.Equal(t, ctl.ExitUsage, r.code, "%v: %s", args, r.stderr)
		require.Contains(t, r.stderr, "--help for usage", "%v", args)
	}
	r = run("dead-letters", "lst")
	require.Contains(t, r.stderr, "did you mean list?")
}

// TestOutputFormats: -o json and -o yaml print the API's answer as it came
// (YAML with the keys in its order and its types kept), wherever -o is.
func TestOutputFormats(t *testing.T) {
	t.Parallel()
	const answer = `{"name":"ops","role":"operator","n":12,"f":1.5,"s":"123","yes":"on","nil":null,"list":[{"b":1,"a":true}],"multi":"a\nb"}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)

	var want any
	require.NoError(t, json.Unmarshal([]byte(answer), &want))
	for _, args := range [][]string{
		{"whoami", "-o", "yaml"}, {"-o", "yaml", "whoami"}, {"whoami", "--output=yaml"}, {"--output", "yaml", "whoami"},
	} {
		r := cli(t, srv.URL, viewerToken, args...)
		require.Equal(t, ctl.ExitOK, r.code, "%v: %s", args, r.stderr)
		var got any
		require.NoError(t, yaml.Unmarshal([]byte(r.stdout), &got), r.stdout)
		require.Equal(t, normalise(t, want), normalise(t, got), "%v:\n%s", args, r.stdout)
		require.True(t, strings.HasPrefix(r.stdout, "name: ops\nrole: operator\n"), "the API's key order:\n%s", r.stdout)
		require.Contains(t, r.stdout, `s: "123"`, "a string stays a string")
	}
	for _, args := range [][]string{{"whoami", "-o", "json"}, {"-o", "json", "whoami"}} {
		r := cli(t, srv.URL, viewerToken, args...)
		require.Equal(t, ctl.ExitOK, r.code, r.stderr)
		var got any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &got), r.stdout)
		require.Equal(t, want, got)
	}
	r := cli(t, srv.URL, viewerToken, "whoami")
	require.Equal(t, ctl.ExitOK, r.code, r.stderr)
	require.Equal(t, "ops (operator)\n", r.stdout)
	r = cli(t, srv.URL, viewerToken, "whoami", "-o", "xml")
	require.Equal(t, ctl.ExitUsage, r.code)
	require.Contains(t, r.stderr, "table, json or yaml")
}

// normalise makes YAML's and JSON's decodings comparable (numbers).
func normalise(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// TestURLBeforeTheCommandIsTheServers: endpoints create and update have a
// --url of their own (the endpoint's); a --url before the command is still
// dlq-admin's address, as it always was, and --server is its other name.
func TestURLBeforeTheCommandIsTheServers(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b map[string]any
		_ = json.NewDecoder(r.Body).Decode(&b)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		_, _ = io.WriteString(w, `{"id":"e1","enabled":true}`)
	}))
	t.Cleanup(srv.Close)
	const nowhere = "http://127.0.0.1:1" // AEGISCTL_URL: never reached
	for _, args := range [][]string{
		{"--url", srv.URL, "endpoints", "create", "--url", "https://hook.example.com/a"},
		{"--url=" + srv.URL, "-o", "json", "endpoints", "create", "--url", "https://hook.example.com/a"},
		{"endpoints", "create", "--url", "https://hook.example.com/a", "--server", srv.URL},
		{"--server", srv.URL, "endpoints", "update", "e1", "--url", "https://hook.example.com/a"},
	} {
		mu.Lock()
		bodies = nil
		mu.Unlock()
		r := cli(t, nowhere, operatorToken, args...)
		require.Equal(t, ctl.ExitOK, r.code, "%v: %s", args, r.stderr)
		mu.Lock()
		require.Len(t, bodies, 1, "%v", args)
		require.Equal(t, "https://hook.example.com/a", bodies[0]["url"], "%v", args)
		mu.Unlock()
	}
	// Elsewhere --url is dlq-admin's, before or after the command.
	r := cli(t, nowhere, operatorToken, "endpoints", "list", "--url", srv.URL)
	require.Equal(t, ctl.ExitOK, r.code, r.stderr)
}
