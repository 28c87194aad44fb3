package bench

import (
	"fmt"
	"time"

	"github.com/aegis-payments/aegis/tools/devstack/internal/chaos"
)

// SoakTimeScale is the soak's default retention scale: one day of
// retention passes in 30 s of wall time (chaos.WeekScale's factor), so the
// 30-day outbound retentions are 15 minutes: each is active within a
// one-hour soak.
const SoakTimeScale = chaos.WeekScale

// soakRetention lists the retention settings the soak shortens, and the
// settings they must outlast (a service refuses a retention shorter than
// what it keeps rows for): all are divided by one factor, so the config's
// rules hold as they do at the defaults. One line per setting: a new
// retention (or what it must outlast) is one more name here. Each default,
// and the floor a scaled value keeps, is chaos.ScaledVars' row of the same
// name, the one list of durations that matter over days (a duration added
// to a config reader belongs there anyway: its test says so); its fixed
// value, if the chaos profiles keep it fixed, is ignored here.
var soakRetention = []string{
	"OUTBOUND_LOG_RETENTION",     // delivery attempts
	"OUTBOUND_MESSAGE_RETENTION", // outbound messages and their finished deliveries
	"OUTBOUND_RETRY_SCHEDULE",    // the outbound retentions must outlast it plus OUTBOUND_DISABLE_AFTER
	"OUTBOUND_DISABLE_AFTER",     // as OUTBOUND_RETRY_SCHEDULE
}

// retentionSetting is one setting the soak applies: its variable, its
// default and its value in the soak.
type retentionSetting struct {
	Env           string
	Real, Soak    time.Duration
	Value, Reader string
}

// soakRetentionSettings scales every soakRetention setting by scale (≤ 1:
// the defaults, nothing set).
func soakRetentionSettings(scale float64) ([]retentionSetting, error) {
	vars := map[string]chaos.ScaledVar{}
	for _, v := range chaos.ScaledVars() {
		vars[v.Env] = v
	}
	var out []retentionSetting
	for _, env := range soakRetention {
		v, ok := vars[env]
		if !ok {
			return nil, fmt.Errorf("soak retention %s: no row in chaos.ScaledVars (its default and floor live there)", env)
		}
		if v.NotAVariable {
			return nil, fmt.Errorf("soak retention %s: built in, no variable sets it", env)
		}
		v.Fixed = 0 // housekeeping the chaos profiles keep fixed: here it is the point
		out = append(out, retentionSetting{Env: env, Real: v.Value(1), Soak: v.Value(scale), Value: v.EnvValue(scale), Reader: string(v.Reader)})
	}
	return out, nil
}

// retentionEnv is the settings as the services' environment (nil at scale
// 1 or less: the defaults).
func retentionEnv(settings []retentionSetting, scale float64) map[string]string {
	if scale <= 1 {
		return nil
	}
	env := map[string]string{}
	for _, s := range settings {
		env[s.Env] = s.Value
	}
	return env
}
