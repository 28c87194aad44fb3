package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"
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

// post sends a write and decodes its answer into out as what, unless
// -o json|yaml printed the answer as it is (printed true).
func (e *env) post(ctx context.Context, path string, body any, what string, out any) (printed bool, err error) {
	raw, err := e.c.do(ctx, http.MethodPost, path, nil, body)
	if err != nil {
		return false, err
	}
	if e.structured() {
		return true, e.printRaw(raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return false, fmt.Errorf("decode %s: %w", what, err)
	}
	return false, nil
}

// printRaw writes an API answer as it came: JSON indented, or the same
// document as YAML (keys in the API's order).
func (e *env) printRaw(raw json.RawMessage) error {
	var b []byte
	var err error
	if e.output == "yaml" {
		b, err = jsonToYAML(raw)
	} else {
		var buf bytes.Buffer
		if err = json.Indent(&buf, raw, "", "  "); err == nil {
			buf.WriteByte('\n')
			b = buf.Bytes()
		}
	}
	if err != nil {
		return fmt.Errorf("answer is not JSON: %w", err)
	}
	if _, err := e.out.Write(b); err != nil {
		return fmt.Errorf("write answer: %w", err)
	}
	return nil
}

// printJSON writes v (an answer put together from several, such as every
// page of a list) as printRaw writes an answer.
func (e *env) printJSON(v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode answer: %w", err)
	}
	return e.printRaw(raw)
}

// jsonToYAML converts one JSON document to YAML, keeping the order of its
// keys and the type of every value (a JSON string "123" stays a string).
func jsonToYAML(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	node, err := yamlNode(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(node); err != nil {
		return nil, fmt.Errorf("encode YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode YAML: %w", err)
	}
	return buf.Bytes(), nil
}

// yamlNode reads the next JSON value from dec as a YAML node.
func yamlNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("read JSON: %w", err)
	}
	scalar := func(tag, v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v} }
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("read JSON: %w", err)
				}
				key, ok := k.(string)
				if !ok {
					return nil, fmt.Errorf("read JSON: key %v is not a string", k)
				}
				v, err := yamlNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, scalar("!!str", key), v)
			}
			_, err := dec.Token() // '}'
			return n, err
		case '[':
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for dec.More() {
				v, err := yamlNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, v)
			}
			_, err := dec.Token() // ']'
			return n, err
		}
		return nil, fmt.Errorf("read JSON: unexpected %v", t)
	case string:
		return scalar("!!str", t), nil
	case json.Number:
		if _, err := t.Int64(); err == nil {
			return scalar("!!int", t.String()), nil
		}
		return scalar("!!float", t.String()), nil
	case bool:
		return scalar("!!bool", fmt.Sprint(t)), nil
	case nil:
		return scalar("!!null", "null"), nil
	}
	return nil, fmt.Errorf("read JSON: unexpected %T", tok)
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
