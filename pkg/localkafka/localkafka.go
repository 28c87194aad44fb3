package localkafka

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config is how New builds the cluster.
type Config struct {
	// DisableMemberExpiry leaves kfake's own coordinator alone, ghosts and
	// all. Only for showing the difference (tests, a planted chaos fault).
	DisableMemberExpiry bool
	// CheckInterval is how often the reaper looks at the groups it knows
	// (default 250ms). A dead member leaves at most this much later than its
	// session timeout.
	CheckInterval time.Duration
	// Logger receives one line per expired member (default: discarded).
	Logger *slog.Logger
	// ClientOpts are added to the reaper's franz-go client: TLS and SASL
	// for a cluster built with kfake.TLS or kfake.EnableSASL (the reaper
	// needs a superuser: it leaves groups on other members' behalf).
	ClientOpts []kgo.Opt
}

// Cluster is a kfake cluster plus, unless disabled, its member reaper. Use
// the embedded *kfake.Cluster for everything kfake offers, but close it with
// Cluster.Close so the reaper stops first.
type Cluster struct {
	*kfake.Cluster
	reaper    *reaper
	closeOnce sync.Once
}

// New starts a kfake cluster with opts and, unless cfg.DisableMemberExpiry,
// the member reaper described in the package documentation.
func New(cfg Config, opts ...kfake.Opt) (*Cluster, error) {
	if cfg.CheckInterval < 0 {
		return nil, errors.New("localkafka: CheckInterval must not be negative")
	}
	if cfg.CheckInterval == 0 {
		cfg.CheckInterval = 250 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	kc, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	c := &Cluster{Cluster: kc}
	if !cfg.DisableMemberExpiry {
		r, err := startReaper(kc, cfg.CheckInterval, cfg.Logger, cfg.ClientOpts...)
		if err != nil {
			kc.Close()
			return nil, fmt.Errorf("start member reaper: %w", err)
		}
		c.reaper = r
	}
	return c, nil
}

// Close stops the reaper, then the cluster. It is safe to call more than once.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		if c.reaper != nil {
			c.reaper.stop()
		}
		c.Cluster.Close()
	})
}

// Expired is how many members the reaper has removed so far (0 without one).
func (c *Cluster) Expired() int64 {
	if c.reaper == nil {
		return 0
	}
	return c.reaper.expired.Load()
}
