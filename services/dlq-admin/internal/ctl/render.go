package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		t.row(header...)
	}
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		// A tab or newline in a value would break the columns.
		cells[i] = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error {
	if err := t.tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// printRaw writes an API answer as it came, indented.
// post sends a write and decodes its answer into out as what, unless
// --output json printed the answer as it is (printed true).
func (e *env) post(ctx context.Context, path string, body any, what string, out any) (printed bool, err error) {
	raw, err := e.c.do(ctx, http.MethodPost, path, nil, body)
	if err != nil {
		return false, err
	}
	if e.json {
		return true, e.printRaw(raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return false, fmt.Errorf("decode %s: %w", what, err)
	}
	return false, nil
}

func (e *env) printRaw(raw json.RawMessage) error {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return fmt.Errorf("answer is not JSON: %w", err)
	}
	b.WriteByte('\n')
	_, err := e.out.Write(b.Bytes())
	return err
}

func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.out)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// indent writes raw JSON indented under a heading; null or empty as "(none)".
func (e *env) indent(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		_, err := fmt.Fprintln(e.out, "  (none)")
		return err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "  ", "  "); err != nil {
		return fmt.Errorf("payload is not JSON: %w", err)
	}
	_, err := fmt.Fprintf(e.out, "  %s\n", b.String())
	return err
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// age renders seconds like "3h12m"; "-" for none.
func age(seconds *int64) string {
	if seconds == nil {
		return "-"
	}
	return (time.Duration(*seconds) * time.Second).String()
}

func joinIDs(ids []int64, n int) string {
	if len(ids) == 0 {
		return "none"
	}
	parts := make([]string, 0, n)
	for i, id := range ids {
		if i == n {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, strconv.FormatInt(id, 10))
	}
	return strings.Join(parts, ", ")
}
