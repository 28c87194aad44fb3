package bench

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// cpuProfile is a CPU profile as the runtime writes one: samples counted
// and timed, each a stack of functions named by a slash-separated list
// (the innermost first).
func cpuProfile(samples map[string]int64) *profile.Profile {
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        10_000_000,
		DurationNanos: int64(30 * time.Second),
	}
	locs := map[string]*profile.Location{}
	for stack, ns := range samples {
		smp := &profile.Sample{Value: []int64{ns / 10_000_000, ns}}
		for _, name := range strings.Split(stack, "|") {
			loc, ok := locs[name]
			if !ok {
				id := uint64(len(locs) + 1)
				fn := &profile.Function{ID: id, Name: name}
				loc = &profile.Location{ID: id, Line: []profile.Line{{Function: fn}}}
				locs[name] = loc
				p.Function = append(p.Function, fn)
				p.Location = append(p.Location, loc)
			}
			smp.Location = append(smp.Location, loc)
		}
		p.Sample = append(p.Sample, smp)
	}
	return p
}

// The soak fetches each service's profile over pprof's HTTP endpoint,
// keeps the file and summarises it by the functions with the most CPU.
func TestProfilerCapturesAndSummarises(t *testing.T) {
	var body bytes.Buffer
	own := "github.com/aegis-payments/aegis/pkg/consumer."
	if err := cpuProfile(map[string]int64{
		"a.heavy|" + own + "handle|" + own + "run":               6e9,
		"b.light|" + own + "run":                                 2e9,
		"c.least|" + own + "run|" + own + "retry|" + own + "run": 1e9, // run recursing counts once
		"d.rest": 1e9,
	}).Write(&body); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.URL.String())
		mu.Unlock()
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
	if len(asked) != len(soakProfiled()) || asked[0] != "/debug/pprof/profile?seconds=30" {
		t.Errorf("asked for %v", asked)
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
	if len(top.Own) != 3 || top.Own[0] != (FuncShare{"pkg/consumer.run", 0.9}) || top.Own[1] != (FuncShare{"pkg/consumer.handle", 0.6}) ||
		top.Own[2] != (FuncShare{"pkg/consumer.retry", 0.1}) {
		t.Errorf("own: %+v", top.Own)
	}
}

// A report rendered again from a run's JSON summarises the files that are
// still there; a window whose files are gone keeps its summaries.
func TestReadProfilesSummarisesTheKeptFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "w01-payout-worker.pprof")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := cpuProfile(map[string]int64{"a.f|github.com/aegis-payments/aegis/pkg/x.g": 1e9}).Write(f); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	old := []ProfileTop{{Service: "payout-worker", CPU: time.Second}}
	res := &SoakResult{Profiles: []SoakProfile{
		{Window: 1, Files: []string{file}, Tops: old},
		{Window: 12, Files: []string{filepath.Join(dir, "w12-payout-worker.pprof")}, Tops: old},
	}}
	if err := res.ReadProfiles(); err != nil {
		t.Fatal(err)
	}
	if got := res.Profiles[0].Tops; len(got) != 1 || got[0].Service != "payout-worker" || len(got[0].Own) != 1 || got[0].Own[0].Func != "pkg/x.g" {
		t.Errorf("window 1: %+v", got)
	}
	if got := res.Profiles[1].Tops; len(got) != 1 || got[0].Own != nil {
		t.Errorf("window 12 (no file): %+v", got)
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
