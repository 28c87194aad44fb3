package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, from this package's directory.
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.work")); err != nil {
		t.Fatalf("repository root not found at %s: %v", dir, err)
	}
	return dir
}

// markdownFiles lists README.md and every .md file under docs/.
func markdownFiles(t *testing.T, dir string) []string {
	t.Helper()
	files := []string{filepath.Join(dir, "README.md")}
	err := filepath.WalkDir(filepath.Join(dir, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	// link matches an inline link or image: [text](target) and ![alt](target),
	// with an optional "title".
	link = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// codeSpan matches inline code, whose text is not a link.
	codeSpan = regexp.MustCompile("`[^`]*`")
	heading  = regexp.MustCompile(`^#{1,6}\s+(.+?)\s*#*\s*$`)
)

// prose returns the lines of a Markdown file outside fenced code blocks.
func prose(text string) []string {
	var out []string
	fence := ""
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		case strings.HasPrefix(trimmed, "```"):
			fence = "```"
			continue
		case strings.HasPrefix(trimmed, "~~~"):
			fence = "~~~"
			continue
		}
		out = append(out, line)
	}
	return out
}

// slug is GitHub's anchor for a heading: lower case, inline code and
// punctuation dropped, spaces as hyphens.
func slug(h string) string {
	h = strings.ReplaceAll(h, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors lists the heading anchors of a Markdown file, with GitHub's -1,
// -2 suffixes for repeated headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose(text) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// TestRelativeLinksResolve fails for a relative link in README.md or docs/
// whose file does not exist, or whose #fragment names no heading of the
// Markdown file it points at.
func TestRelativeLinksResolve(t *testing.T) {
	t.Parallel()
	dir := root(t)
	texts := map[string]string{}
	read := func(p string) string {
		if s, ok := texts[p]; ok {
			return s
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		texts[p] = string(b)
		return texts[p]
	}
	checked := 0
	for _, file := range markdownFiles(t, dir) {
		rel, _ := filepath.Rel(dir, file)
		for n, line := range prose(read(file)) {
			for _, m := range link.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				path, fragment, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					if strings.HasPrefix(path, "/") {
						t.Errorf("%s: %q is absolute; link relative to the file", rel, target)
						continue
					}
					dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s (prose line %d): %q: no such file", rel, n+1, target)
						continue
					}
					if r, err := filepath.Rel(dir, dest); err != nil || strings.HasPrefix(r, "..") {
						t.Errorf("%s: %q points outside the repository", rel, target)
						continue
					}
				}
				if fragment != "" && strings.HasSuffix(dest, ".md") && !anchors(read(dest))[fragment] {
					t.Errorf("%s (prose line %d): %q: no heading with anchor #%s", rel, n+1, target, fragment)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d relative links found: the link pattern no longer matches the docs", checked)
	}
}

func TestSlug(t *testing.T) {
	t.Parallel()
	for h, want := range map[string]string{
		"Who may move money: API clients, destinations, limits": "who-may-move-money-api-clients-destinations-limits",
		"Payout state machine":                                  "payout-state-machine",
		"`make dev`'s secrets":                                  "make-devs-secrets",
		"NEEDS_REVIEW payouts: ops resolve what machines can't": "needs_review-payouts-ops-resolve-what-machines-cant",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
	got := anchors("# A\n\n```\n# not a heading\n```\n## A\n")
	if !got["a"] || !got["a-1"] || got["not-a-heading"] {
		t.Errorf("anchors = %v, want a and a-1 only", got)
	}
}
