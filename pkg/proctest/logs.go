package proctest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"sync"
)

// Logs is the stdout a test hands to a service's in-process run function:
// safe to read while the service writes to it.
type Logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// ListenAddr is the address of the first "http server listening" JSON log
// line, or "" before the server listens.
func (l *Logs) ListenAddr() string {
	sc := bufio.NewScanner(strings.NewReader(l.String()))
	for sc.Scan() {
		var line struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "http server listening" {
			return line.Addr
		}
	}
	return ""
}
