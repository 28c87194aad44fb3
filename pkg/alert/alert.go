package alert

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
)

// Severity of an alert.
type Severity string

// Severities.
const (
	Info     Severity = "info"
	Warning  Severity = "warning"
	Error    Severity = "error"
	Critical Severity = "critical"
)

// Alert is one thing a person should know about.
type Alert struct {
	// Key names the thing, e.g. "dead_letter:aegis.transactions:permanent"
	// (keys.go); its kind (the part before the first colon) names the
	// Prometheus rule that pages for it (Rule).
	Key      string
	Severity Severity
	Summary  string
	Details  map[string]any
}

// Config configures the alerter.
type Config struct {
	// Source names the service raising alerts.
	Source string
}

// RemovedSettings are the webhook sink's settings, gone since Alertmanager
// became the one paging path.
func RemovedSettings() []string {
	return []string{"ALERT_WEBHOOK_URL", "ALERT_WEBHOOK_FORMAT", "ALERT_PAGERDUTY_ROUTING_KEY", "ALERT_DEDUPE_WINDOW"}
}

// ReadConfig refuses the settings of the webhook sink that pkg/alert no
// longer has: pages go through Prometheus rules and Alertmanager
// (docs/operations/alerts.md, "Paging"), and a service configured to post
// alerts itself must not start believing it does:
//
//	ALERT_WEBHOOK_URL            removed: a service started with it set refuses to start; pages go
//	                             through Alertmanager (docs/operations/alerts.md, "Paging")
//	ALERT_WEBHOOK_FORMAT         removed with ALERT_WEBHOOK_URL: set, the service refuses to start
//	ALERT_PAGERDUTY_ROUTING_KEY  removed with ALERT_WEBHOOK_URL: set, the service refuses to start
//	                             (Alertmanager's PagerDuty receiver holds the routing key)
//	ALERT_DEDUPE_WINDOW          removed with ALERT_WEBHOOK_URL: set, the service refuses to start
//	                             (Alertmanager groups and repeats notifications)
func ReadConfig(env *config.Env, source string) Config {
	// Each name spelled out: the configuration reference is generated from
	// these calls (tools/devstack/internal/configdoc).
	for name, set := range map[string]bool{
		"ALERT_WEBHOOK_URL":           isSet(env.Lookup("ALERT_WEBHOOK_URL")),
		"ALERT_WEBHOOK_FORMAT":        isSet(env.Lookup("ALERT_WEBHOOK_FORMAT")),
		"ALERT_PAGERDUTY_ROUTING_KEY": isSet(env.Lookup("ALERT_PAGERDUTY_ROUTING_KEY")),
		"ALERT_DEDUPE_WINDOW":         isSet(env.Lookup("ALERT_DEDUPE_WINDOW")),
	} {
		if set {
			env.Errorf("%s was removed: services no longer post alerts themselves; pages go through Prometheus rules and "+
				"Alertmanager (see docs/operations/alerts.md, \"Paging\"): unset it", name)
		}
	}
	return Config{Source: source}
}

func isSet(_ string, ok bool) bool { return ok }

// Alerter raises alerts: a structured log line and a counter. It sends
// nothing anywhere: what pages is the Prometheus rule on the condition's
// gauge (Rule names it), which Alertmanager routes and resolves.
type Alerter struct {
	logger *slog.Logger
	count  *prometheus.CounterVec
}

// New returns an alerter and registers aegis_alerts_total. cfg is what
// ReadConfig checked (it refused the removed settings); nothing in it
// changes how an alert is raised.
func New(cfg Config, deps lifecycle.Deps) (*Alerter, error) {
	deps = deps.WithDefaults()
	a := &Alerter{
		logger: deps.Logger.With("component", "alert"),
		count: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_alerts_total", Help: "Alerts raised, by kind of key and severity (what pages is the rule on the condition's gauge).",
		}, []string{"kind", "severity"}),
	}
	if err := deps.Registerer.Register(a.count); err != nil {
		return nil, fmt.Errorf("register alert metrics: %w", err)
	}
	return a, nil
}

// Raise records al: a log line ("ALERT: <summary>", with alert_key,
// severity, alert_rule, runbook and the details) and a count in
// aegis_alerts_total by the key's kind, never the whole key: a key may
// carry a user or endpoint id, and a label per id would make a series per
// user (unbounded, and a pseudonymous id in the metrics). The log line
// keeps the whole key. It never blocks on the network.
func (a *Alerter) Raise(ctx context.Context, al Alert) {
	if al.Severity == "" {
		al.Severity = Error
	}
	level := slog.LevelWarn
	if al.Severity == Error || al.Severity == Critical {
		level = slog.LevelError
	}
	rule, runbook := Rule(al.Key), RunbookFallback
	if rule != "" {
		runbook = Runbook(rule)
	}
	attrs := []any{"alert_key", al.Key, "severity", string(al.Severity), "alert_rule", rule, "runbook", runbook}
	for k, v := range al.Details {
		attrs = append(attrs, k, v)
	}
	a.logger.Log(ctx, level, "ALERT: "+al.Summary, attrs...)
	a.count.WithLabelValues(KindOf(al.Key), string(al.Severity)).Inc()
}
