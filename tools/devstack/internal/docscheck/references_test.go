package docscheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// outside matches a reference to a design document outside the
	// repository; the design is docs/design/.
	outside = regexp.MustCompile(`\b(ARCHITECTURE|CONTRACT|STYLE)\.md\b|shared[/]design|\.\./shared/`)
	// issueNumber matches the word issue followed by a number (with or
	// without #): history, where a comment or doc should state the fact.
	issueNumber = regexp.MustCompile(`(?i)\bissues? #?[0-9]+`)
)

// TestNoReferenceOutsideTheRepositoryOrToIssueNumbers fails for a Go, SQL,
// YAML or Markdown file (or the Makefile) that cites a design document
// outside the repository or an issue by number.
func TestNoReferenceOutsideTheRepositoryOrToIssueNumbers(t *testing.T) {
	t.Parallel()
	dir := root(t)
	scanned := 0
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == ".git" || rel == "bin" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(p) {
		case ".go", ".md", ".sql", ".yaml", ".yml":
		default:
			if d.Name() != "Makefile" {
				return nil
			}
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		scanned++
		for n, line := range strings.Split(string(b), "\n") {
			if m := outside.FindString(line); m != "" {
				t.Errorf("%s:%d: %q points outside the repository; cite docs/design/ instead", rel, n+1, m)
			}
			if m := issueNumber.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: say what it guarantees or what was measured, not the issue", rel, n+1, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 100 {
		t.Fatalf("only %d files scanned: the walk no longer covers the repository", scanned)
	}
}
