package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Set by the linker (-X); see doc.go. Never assigned in code.
var (
	version = ""
	commit  = ""
)

// Info is one binary's build.
type Info struct {
	Version string // the release tag (v1.2.0), or "dev"
	Commit  string // the commit's full hash, with "-dirty" when built from modified sources
	Go      string // the toolchain, e.g. go1.26.0
}

// Get returns the running binary's build.
func Get() Info {
	return resolve(version, commit, debug.ReadBuildInfo)
}

func resolve(v, c string, read func() (*debug.BuildInfo, bool)) Info {
	info := Info{Version: v, Commit: c, Go: runtime.Version()}
	if info.Version == "" {
		info.Version = "dev"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
		if bi, ok := read(); ok {
			var rev string
			var dirty bool
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
			if rev != "" {
				info.Commit = rev
				if dirty {
					info.Commit += "-dirty"
				}
			}
		}
	}
	return info
}

// String is the line `--version` prints: "<name> <version> (commit <commit>, <go>)".
func (i Info) String(name string) string {
	return fmt.Sprintf("%s %s (commit %s, %s)", name, i.Version, i.Commit, i.Go)
}

// Register adds aegis_build_info{version,commit,go} 1 to reg.
func Register(reg prometheus.Registerer, i Info) error {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "aegis_build_info",
		Help:        "Always 1; its labels say which build runs: release version, commit and Go toolchain.",
		ConstLabels: prometheus.Labels{"version": i.Version, "commit": i.Commit, "go": i.Go},
	})
	g.Set(1)
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("register aegis_build_info: %w", err)
	}
	return nil
}
