package bench

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// cpuProfile is a CPU profile as the runtime writes one: samples counted
// and timed, each in the function of its first location.
func cpuProfile(samples map[string]int64) *profile.Profile {
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        10_000_000,
		DurationNanos: int64(30 * time.Second),
	}
	id := uint64(1)
	for name, ns := range samples {
		fn := &profile.Function{ID: id, Name: name}
		loc := &profile.Location{ID: id, Line: []profile.Line{{Function: fn}}}
		p.Function = append(p.Function, fn)
		p.Location = append(p.Location, loc)
		p.Sample = append(p.Sample, &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{ns / 10_000_000, ns}})
		id++
	}
	return p
}

// The soak fetches each service's profile over pprof's HTTP endpoint,
// keeps the file and summarises it by the functions with the most CPU.
func TestProfilerCapturesAndSummarises(t *testing.T) {
	var body bytes.Buffer
	if err := cpuProfile(map[string]int64{"a.heavy": 6e9, "b.light": 2e9, "c.least": 1e9, "d.rest": 1e9}).Write(&body); err != nil {
		t.Fatal(err)
	}
	var asked string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = r.URL.String()
		_, _ = w.Write(body.Bytes())
	}))
	defer srv.Close()

	dir := t.TempDir()
	p, env, err := newProfiler(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(env) != len(soakProfiled()) || env["payout-worker"]["PPROF_ADDR"] == env["webhook-api"]["PPROF_ADDR"] {
		t.Fatalf("each service needs a pprof address of its own: %v", env)
	}
	for svc := range p.addrs {
		p.addrs[svc] = strings.TrimPrefix(srv.URL, "http://")
	}
	var said []string
	got := p.capture(context.Background(), 3, func(f string, a ...any) { said = append(said, f) })
	if len(said) > 0 || len(got.Files) != len(soakProfiled()) || len(got.Tops) != len(soakProfiled()) {
		t.Fatalf("capture: %+v, said %v", got, said)
	}
	if asked != "/debug/pprof/profile?seconds=30" {
		t.Errorf("asked for %s", asked)
	}
	if _, err := os.Stat(filepath.Join(dir, "w03-payout-worker.pprof")); err != nil {
		t.Errorf("the profile file is not kept: %v", err)
	}
	top := got.Tops[0]
	if top.CPU != 10*time.Second || top.Len != 30*time.Second {
		t.Errorf("CPU %s over %s, want 10s over 30s", top.CPU, top.Len)
	}
	if len(top.Top) != 4 || top.Top[0] != (FuncShare{"a.heavy", 0.6}) || top.Top[1] != (FuncShare{"b.light", 0.2}) ||
		top.Top[2].Func != "c.least" || top.Top[3].Func != "d.rest" {
		t.Errorf("top: %+v", top.Top)
	}
}

// A service that does not answer loses its profile, not the others'.
func TestProfilerSaysAServiceItCouldNotProfile(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", http.StatusNotFound)
	}))
	defer srv.Close()
	p, _, err := newProfiler(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for svc := range p.addrs {
		p.addrs[svc] = strings.TrimPrefix(srv.URL, "http://")
	}
	var said []string
	got := p.capture(context.Background(), 1, func(f string, a ...any) { said = append(said, f) })
	if len(got.Files) != 0 || len(said) != len(soakProfiled()) {
		t.Errorf("got %+v, said %d", got, len(said))
	}
}

func TestProfiledWindowsAreTheFirstAndTheLast(t *testing.T) {
	if got := profiledWindows(12); len(got) != 2 || got[0] != 0 || got[1] != 11 {
		t.Errorf("12 windows: %v", got)
	}
	if got := profiledWindows(1); len(got) != 1 || got[0] != 0 {
		t.Errorf("1 window: %v", got)
	}
}
