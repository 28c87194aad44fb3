// Package alertlog reads the services' structured ALERT log lines
// (pkg/alert.Raise: "msg":"ALERT: <summary>" with alert_key, severity,
// alert_rule, runbook and the alert's details) out of a stack's log stream.
// Since Alertmanager is the one paging path, a service sends its alerts
// nowhere: the line is the record of each alert, and the end-to-end tests
// and chaos read it where they used to run a webhook sink.
package alertlog

import (
	"bufio"
	"encoding/json"
	"io"
	"strings"
	"sync"
)

// Line is one ALERT log line.
type Line struct {
	// Service is the line's service attribute (pkg/logging sets it).
	Service  string
	Key      string
	Severity string
	Rule     string
	Runbook  string
	Summary  string
	// Raw is the line as logged (summary and details included), for
	// searching what it names.
	Raw string
}

// Parse reads line, as logged or prefixed by the stack ("name: {...}"),
// and reports whether it is an ALERT line.
func Parse(line string) (Line, bool) {
	i := strings.IndexByte(line, '{')
	if i < 0 {
		return Line{}, false
	}
	var v struct {
		Msg      string `json:"msg"`
		Service  string `json:"service"`
		Key      string `json:"alert_key"`
		Severity string `json:"severity"`
		Rule     string `json:"alert_rule"`
		Runbook  string `json:"runbook"`
	}
	if json.Unmarshal([]byte(line[i:]), &v) != nil {
		return Line{}, false
	}
	summary, ok := strings.CutPrefix(v.Msg, "ALERT: ")
	if !ok || v.Key == "" {
		return Line{}, false
	}
	return Line{Service: v.Service, Key: v.Key, Severity: v.Severity, Rule: v.Rule, Runbook: v.Runbook,
		Summary: summary, Raw: line[i:]}, true
}

// All is every ALERT line of a log stream, in order.
func All(log string) []Line {
	var out []Line
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if l, ok := Parse(sc.Text()); ok {
			out = append(out, l)
		}
	}
	return out
}

// Recorder is an io.Writer for a log stream written a line at a time (the
// stack's writer writes each line whole): it passes every write on to next
// and keeps the ALERT lines.
type Recorder struct {
	next io.Writer

	mu    sync.Mutex
	lines []Line
}

// NewRecorder returns a recorder that passes the stream on to next.
func NewRecorder(next io.Writer) *Recorder { return &Recorder{next: next} }

// Write records the ALERT lines in p and writes p to next.
func (r *Recorder) Write(p []byte) (int, error) {
	for _, s := range strings.Split(string(p), "\n") {
		if l, ok := Parse(s); ok {
			r.mu.Lock()
			r.lines = append(r.lines, l)
			r.mu.Unlock()
		}
	}
	return r.next.Write(p)
}

// Lines is a copy of the ALERT lines recorded so far.
func (r *Recorder) Lines() []Line {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Line(nil), r.lines...)
}

// Naming counts the recorded ALERT lines whose text mentions s.
func (r *Recorder) Naming(s string) int {
	n := 0
	for _, l := range r.Lines() {
		if strings.Contains(l.Raw, s) {
			n++
		}
	}
	return n
}
