package deliver

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/outbound"
)

// Defaults of the settings (docs/design/outbound.md).
const (
	DefaultGroup            = "outbound-events"
	DefaultSenders          = 32
	DefaultPerEndpoint      = 4
	DefaultPollInterval     = 250 * time.Millisecond
	DefaultTimeout          = 15 * time.Second
	DefaultDisableAfter     = 120 * time.Hour
	DefaultHealthInterval   = time.Minute
	DefaultLogRetention     = 720 * time.Hour
	DefaultMessageRetention = 720 * time.Hour
	// DefaultSchedule is Svix's: the delays after the immediate first
	// attempt, eight attempts over about 27 h 35 min.
	DefaultSchedule = "5s,5m,30m,2h,5h,10h,10h"
	// ResponseLimit is how much of a receiver's answer is read and stored.
	ResponseLimit = 1 << 10
)

// Config is outbound delivery's settings; the field names map to the
// environment in outbox-relay's run.go.
type Config struct {
	// Group is the consumer group of the intake (OUTBOUND_GROUP).
	Group   string
	Brokers []string
	// Membership and Security are the relay's Kafka settings.
	Membership kafkax.Membership
	Security   kafkax.Security
	// Senders is how many attempts this process runs at once.
	Senders int
	// PerEndpoint is how many attempts to one endpoint this process runs
	// at once.
	PerEndpoint int
	// PollInterval is how often an idle dispatcher looks for due
	// deliveries (an intake commit or a finished attempt wakes it sooner).
	PollInterval time.Duration
	// Timeout bounds one attempt, answer included.
	Timeout time.Duration
	// Lease is how long a claimed delivery is this dispatcher's; zero takes
	// 2×Timeout+15s. It must exceed Timeout.
	Lease time.Duration
	// Schedule is the delays after the immediate first attempt: attempt n
	// failing is followed by attempt n+1 after Schedule[n-1] (±10 %), and
	// the delivery fails after len(Schedule)+1 attempts.
	Schedule []time.Duration
	// DisableAfter: an endpoint failing every attempt for this long
	// (counted from when it was last enabled if later) is disabled.
	DisableAfter time.Duration
	// HealthInterval is how often the failing endpoints are looked for.
	HealthInterval time.Duration
	// LogRetention keeps attempts; MessageRetention messages (and their
	// finished deliveries) that have no pending delivery.
	LogRetention     time.Duration
	MessageRetention time.Duration
	// Policy is the URL safety applied at connect time.
	Policy outbound.Policy
	// MaxPollRecords bounds one intake poll (default 500).
	MaxPollRecords int
}

// ParseSchedule reads "5s,5m,30m" into its delays.
func ParseSchedule(s string) ([]time.Duration, error) {
	var out []time.Duration
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		d, err := time.ParseDuration(part)
		if err != nil {
			return nil, fmt.Errorf("%q is not a duration", part)
		}
		out = append(out, d)
	}
	return out, nil
}

// WithDefaults fills the zero values that have a default.
func (c Config) WithDefaults() Config {
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.Senders == 0 {
		c.Senders = DefaultSenders
	}
	if c.PerEndpoint == 0 {
		c.PerEndpoint = DefaultPerEndpoint
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Lease == 0 {
		c.Lease = 2*c.Timeout + 15*time.Second
	}
	if c.Schedule == nil {
		c.Schedule, _ = ParseSchedule(DefaultSchedule)
	}
	if c.DisableAfter == 0 {
		c.DisableAfter = DefaultDisableAfter
	}
	if c.HealthInterval == 0 {
		c.HealthInterval = DefaultHealthInterval
	}
	if c.LogRetention == 0 {
		c.LogRetention = DefaultLogRetention
	}
	if c.MessageRetention == 0 {
		c.MessageRetention = DefaultMessageRetention
	}
	if c.MaxPollRecords == 0 {
		c.MaxPollRecords = 500
	}
	return c
}

// Validate reports settings that cannot work (after WithDefaults).
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, config.Invalid("Brokers", "must list at least one broker"))
	}
	if c.Senders < 1 {
		errs = append(errs, config.Invalid("Senders", "must be at least 1"))
	}
	if c.PerEndpoint < 1 {
		errs = append(errs, config.Invalid("PerEndpoint", "must be at least 1"))
	}
	if c.PollInterval <= 0 {
		errs = append(errs, config.Invalid("PollInterval", "must be positive"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, config.Invalid("Timeout", "must be positive"))
	}
	if c.Lease <= c.Timeout {
		errs = append(errs, config.Invalid("Lease", "must exceed %s (%s): a claim must outlast its attempt", config.Ref("Timeout"), c.Timeout))
	}
	if len(c.Schedule) == 0 {
		errs = append(errs, config.Invalid("Schedule", "must list at least one delay"))
	}
	var total time.Duration
	for _, d := range c.Schedule {
		if d <= 0 {
			errs = append(errs, config.Invalid("Schedule", "delays must be positive"))
			break
		}
		total += d
	}
	if c.DisableAfter <= 0 {
		errs = append(errs, config.Invalid("DisableAfter", "must be positive"))
	}
	if c.HealthInterval <= 0 {
		errs = append(errs, config.Invalid("HealthInterval", "must be positive"))
	}
	// "Recover since" must reach back over everything a disabled endpoint
	// missed: the retries and the failing window.
	if least := total + c.DisableAfter; c.LogRetention <= least {
		errs = append(errs, config.Invalid("LogRetention", "must exceed the retry schedule plus the disable window (%s)", least))
	}
	if least := total + c.DisableAfter; c.MessageRetention <= least {
		errs = append(errs, config.Invalid("MessageRetention", "must exceed the retry schedule plus the disable window (%s)", least))
	}
	if c.MaxPollRecords < 0 {
		errs = append(errs, config.Invalid("MaxPollRecords", "must not be negative"))
	}
	return errors.Join(errs...)
}
