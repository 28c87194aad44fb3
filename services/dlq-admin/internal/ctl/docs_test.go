package ctl_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/ctl"
)

// TestDocumentedInvocationsParse reads every aegisctl invocation in the
// repository's Markdown (code spans and blocks) and checks that its
// command exists and that it takes the flags written after it: the docs
// and runbooks cannot drift from the command tree.
func TestDocumentedInvocationsParse(t *testing.T) {
	t.Parallel()
	const root = "../../../.."
	var files []string
	require.NoError(t, filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	}))
	require.NotEmpty(t, files)

	fence := regexp.MustCompile("(?ms)^\\s*```[^\\n]*\\n(.*?)^\\s*```")
	span := regexp.MustCompile("`([^`]+)`")
	call := regexp.MustCompile(`\baegisctl\b([^/'].*)?$`)
	checked := 0
	for _, file := range files {
		raw, err := os.ReadFile(file)
		require.NoError(t, err)
		text := string(raw)
		var snippets []string
		for _, m := range fence.FindAllStringSubmatch(text, -1) {
			snippets = append(snippets, strings.Split(m[1], "\n")...)
		}
		for _, m := range span.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
			snippets = append(snippets, strings.ReplaceAll(m[1], "\n", " "))
		}
		for _, s := range snippets {
			if i := strings.Index(s, " #"); i >= 0 {
				s = s[:i]
			}
			m := call.FindStringSubmatch(s)
			if m == nil {
				continue
			}
			for _, args := range expand(words(m[1])) {
				checked++
				requireParses(t, file, s, args)
			}
		}
	}
	require.Greater(t, checked, 20, "the docs show aegisctl invocations")
}

// words splits a shell command line (quotes kept together), up to what
// ends the invocation: a pipe, ;, && or an ellipsis.
func words(s string) []string {
	var out []string
	var cur strings.Builder
	quote, quoted := rune(0), false
	flush := func() {
		w := cur.String()
		if !quoted && (w == "|" || w == ";" || w == "&&" || w == "…" || w == "..." || w == ")") {
			quote = -1 // the end
		} else if cur.Len() > 0 || quoted {
			out = append(out, w)
		}
		cur.Reset()
		quoted = false
	}
	for _, r := range s {
		switch {
		case quote == -1:
			return out
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, quoted = r, true
		case r == ' ' || r == '\t' || r == '\\':
			flush()
		default:
			cur.WriteRune(r)
		}
	}
	if quote != -1 {
		flush()
	}
	return out
}

// expand turns "endpoints list|get" into one invocation per alternative.
func expand(args []string) [][]string {
	out := [][]string{nil}
	for i, a := range args {
		alts := []string{a}
		if i < 2 && !strings.HasPrefix(a, "-") && strings.Contains(a, "|") {
			alts = strings.Split(a, "|")
		}
		var next [][]string
		for _, prefix := range out {
			for _, alt := range alts {
				next = append(next, append(append([]string(nil), prefix...), alt))
			}
		}
		out = next
	}
	return out
}

func requireParses(t *testing.T, file, line string, args []string) {
	t.Helper()
	root := ctl.Command()
	c, rest, err := root.Find(args)
	require.NoError(t, err, "%s: %q: no such command", file, line)
	if err := c.ParseFlags(rest); !errors.Is(err, pflag.ErrHelp) {
		require.NoError(t, err, "%s: %q: flags of %q", file, line, c.CommandPath())
	}
	if c.HasSubCommands() {
		// A group named alone, as "aegisctl payouts": no word after it.
		for _, a := range c.Flags().Args() {
			require.Failf(t, "no such command", "%s: %q: %q has no command %q", file, line, c.CommandPath(), a)
		}
	}
}
