package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/pprof/profile"

	"github.com/aegis-payments/aegis/pkg/proctest"
)

// soakProfileLen is how long each CPU profile samples: long enough for a
// few thousand samples per busy process, short against a window.
const soakProfileLen = 30 * time.Second

// soakProfiled are the services the soak profiles (each serves
// net/http/pprof on its own PPROF_ADDR for the run).
func soakProfiled() []string {
	return []string{"webhook-api", "outbox-relay", "payout-worker", "dlq-admin"}
}

// SoakProfile is one window's CPU profiles: a file per service, for
// `go tool pprof -top FILE`, and each one's summary for the report.
type SoakProfile struct {
	Window int
	Files  []string
	Tops   []ProfileTop
}

// ProfileTop is one service's profile in short: the CPU it sampled, the
// functions with the most of it in themselves (Top: flat, mostly the
// runtime and syscalls), and Aegis's own functions with the most of it in
// themselves and what they call (Own: cumulative, which says the stage).
type ProfileTop struct {
	Service string
	CPU     time.Duration
	Len     time.Duration
	Top     []FuncShare
	Own     []FuncShare
}

// ownPrefix starts the name of every function of Aegis's own code.
const ownPrefix = "github.com/aegis-payments/aegis/"

// FuncShare is a function's share of a profile's CPU.
type FuncShare struct {
	Func  string
	Share float64
}

// profileTopN is how many functions a summary lists.
const profileTopN = 8

// readTop summarises a CPU profile file.
func readTop(service, file string) (ProfileTop, error) {
	f, err := os.Open(file)
	if err != nil {
		return ProfileTop{}, err
	}
	defer f.Close()
	prof, err := profile.Parse(f)
	if err != nil {
		return ProfileTop{}, fmt.Errorf("parse %s: %w", file, err)
	}
	return summarise(service, prof), nil
}

// summarise sums the profile's CPU samples by the function they were
// taken in and keeps the heaviest profileTopN.
func summarise(service string, prof *profile.Profile) ProfileTop {
	cpu := len(prof.SampleType) - 1 // cpu nanoseconds, after the sample count
	flat, cum := map[string]int64{}, map[string]int64{}
	var total int64
	for _, smp := range prof.Sample {
		if cpu < 0 || len(smp.Value) <= cpu || len(smp.Location) == 0 || len(smp.Location[0].Line) == 0 {
			continue
		}
		v := smp.Value[cpu]
		total += v
		if fn := smp.Location[0].Line[0].Function; fn != nil {
			flat[fn.Name] += v
		}
		// Each of our functions on the stack once, however deep it recurses.
		seen := map[string]bool{}
		for _, loc := range smp.Location {
			for _, l := range loc.Line {
				if l.Function != nil && strings.HasPrefix(l.Function.Name, ownPrefix) && !seen[l.Function.Name] {
					seen[l.Function.Name] = true
					cum[l.Function.Name] += v
				}
			}
		}
	}
	return ProfileTop{Service: service, CPU: time.Duration(total), Len: time.Duration(prof.DurationNanos),
		Top: heaviest(flat, total, ""), Own: heaviest(cum, total, ownPrefix)}
}

// heaviest is the profileTopN functions of byFunc with the most CPU, as
// shares of total, their names without trim.
func heaviest(byFunc map[string]int64, total int64, trim string) []FuncShare {
	var fs []FuncShare
	for name, v := range byFunc {
		fs = append(fs, FuncShare{Func: strings.TrimPrefix(name, trim), Share: float64(v) / float64(max(total, 1))})
	}
	sort.Slice(fs, func(i, j int) bool {
		if fs[i].Share != fs[j].Share {
			return fs[i].Share > fs[j].Share
		}
		return fs[i].Func < fs[j].Func
	})
	return fs[:min(len(fs), profileTopN)]
}

// profiler takes the services' CPU profiles during a soak, so that a
// decay is explained by where the time went in the first window and in
// the last, not guessed.
type profiler struct {
	dir    string
	addrs  map[string]string
	client *http.Client
}

// newProfiler picks a pprof address for every profiled service and
// returns the variables that give it to each (stack.Config.ServiceEnv).
func newProfiler(dir string) (*profiler, map[string]map[string]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("profiles: %w", err)
	}
	p := &profiler{dir: dir, addrs: map[string]string{}, client: &http.Client{Timeout: soakProfileLen + 30*time.Second}}
	env := map[string]map[string]string{}
	for _, svc := range soakProfiled() {
		port, err := proctest.Port()
		if err != nil {
			return nil, nil, fmt.Errorf("profiles: %w", err)
		}
		p.addrs[svc] = "127.0.0.1:" + strconv.Itoa(port)
		env[svc] = map[string]string{"PPROF_ADDR": p.addrs[svc]}
	}
	return p, env, nil
}

// capture profiles every service's CPU for soakProfileLen at once and
// writes dir/wNN-<service>.pprof; a service it could not profile is left
// out and said (say is called by one goroutine at a time).
func (p *profiler) capture(ctx context.Context, window int, say func(string, ...any)) SoakProfile {
	out := SoakProfile{Window: window}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, svc := range soakProfiled() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			file := filepath.Join(p.dir, fmt.Sprintf("w%02d-%s.pprof", window, svc))
			fetchErr := p.fetch(ctx, svc, file)
			err := fetchErr
			var top ProfileTop
			if err == nil {
				top, err = readTop(svc, file)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				say("soak: profile of %s in window %d: %v", svc, window, err)
			}
			if fetchErr == nil {
				out.Files = append(out.Files, file)
			}
			if err == nil {
				out.Tops = append(out.Tops, top)
			}
		}()
	}
	wg.Wait()
	sort.Strings(out.Files)
	sort.Slice(out.Tops, func(i, j int) bool { return out.Tops[i].Service < out.Tops[j].Service })
	return out
}

func (p *profiler) fetch(ctx context.Context, svc, file string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", p.addrs[svc], int(soakProfileLen.Seconds()))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pprof answered %d", resp.StatusCode)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", file, err)
	}
	return f.Close()
}

// profiledWindows are the windows profiled: the first and the last, whose
// comparison is the soak's verdict.
func profiledWindows(n int) []int {
	if n <= 1 {
		return []int{0}
	}
	return []int{0, n - 1}
}

// ReadProfiles summarises the profile files again, where they are still
// on disk (aegis-soak -render: a report from an earlier run's JSON gets the
// summary of the present code).
func (s *SoakResult) ReadProfiles() error {
profiles:
	for i, p := range s.Profiles {
		var tops []ProfileTop
		for _, file := range p.Files {
			svc := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(file), fmt.Sprintf("w%02d-", p.Window)), ".pprof")
			top, err := readTop(svc, file)
			if errors.Is(err, fs.ErrNotExist) {
				continue profiles // gone: the window's summaries in the JSON stand
			}
			if err != nil {
				return err
			}
			tops = append(tops, top)
		}
		s.Profiles[i].Tops = tops
	}
	return nil
}
