// Package docscheck keeps the repository's prose honest, in the normal `go
// test` run: every relative link in README.md and docs/ resolves to a file
// of the repository (and, for a Markdown file with a #fragment, to one of
// its headings), and no comment or doc points outside the repository or
// tells history by issue number instead of stating the fact.
//
// It has no non-test code: the checks are its tests (links_test.go,
// references_test.go).
package docscheck
