package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
)

// Severity of an alert.
type Severity string

// Severities, as PagerDuty names them.
const (
	Info     Severity = "info"
	Warning  Severity = "warning"
	Error    Severity = "error"
	Critical Severity = "critical"
)

// Alert is one thing a person should know about.
type Alert struct {
	// Key groups repeats of the same alert for de-duplication, e.g.
	// "dead_letter:aegis.transactions:permanent".
	Key      string
	Severity Severity
	Summary  string
	Details  map[string]any
	// Suppressed is how many alerts with this key were folded into this one.
	Suppressed int
	At         time.Time
}

// Format of the webhook sink's body.
type Format string

// Formats.
const (
	FormatGeneric   Format = "generic"
	FormatSlack     Format = "slack"
	FormatPagerDuty Format = "pagerduty"
)

// Config configures the alerter.
type Config struct {
	// Source names the service raising alerts.
	Source string
	// WebhookURL enables the webhook sink.
	WebhookURL string
	Format     Format
	// RoutingKey is the PagerDuty integration key (FormatPagerDuty).
	RoutingKey string
	// DedupeWindow is how long repeats of a key are folded (default 5m).
	DedupeWindow time.Duration
}

// ReadConfig reads where alerts go besides the log line and the
// aegis_alerts_total counter every alert gets:
//
//	ALERT_WEBHOOK_URL            where alerts are also posted; unset: log and metric only
//	ALERT_WEBHOOK_FORMAT         generic (JSON), slack or pagerduty (Events v2)
//	ALERT_PAGERDUTY_ROUTING_KEY  the PagerDuty integration key (with the pagerduty format)
//	ALERT_DEDUPE_WINDOW          how long repeats of one alert key are folded into one post
func ReadConfig(env *config.Env, source string) Config {
	c := Config{
		Source:       source,
		WebhookURL:   env.String("ALERT_WEBHOOK_URL", ""),
		Format:       Format(env.String("ALERT_WEBHOOK_FORMAT", string(FormatGeneric))),
		RoutingKey:   env.String("ALERT_PAGERDUTY_ROUTING_KEY", ""),
		DedupeWindow: env.Duration("ALERT_DEDUPE_WINDOW", 5*time.Minute),
	}
	if err := c.Validate(); err != nil {
		env.Errorf("%v", err)
	}
	return c
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch c.Format {
	case "", FormatGeneric, FormatSlack:
	case FormatPagerDuty:
		if c.WebhookURL != "" && c.RoutingKey == "" {
			return errors.New("ALERT_PAGERDUTY_ROUTING_KEY is required with ALERT_WEBHOOK_FORMAT=pagerduty")
		}
	default:
		return fmt.Errorf("ALERT_WEBHOOK_FORMAT %q: want generic, slack or pagerduty", c.Format)
	}
	if c.DedupeWindow < 0 {
		return errors.New("ALERT_DEDUPE_WINDOW must not be negative")
	}
	if c.WebhookURL != "" {
		// The URL carries a secret (Slack's and most webhooks' path is the
		// credential): the error describes it without quoting it.
		u, err := url.Parse(c.WebhookURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return errors.New("ALERT_WEBHOOK_URL must be an http:// or https:// URL with a host (its value is not shown: it holds a secret)")
		}
	}
	return nil
}

type window struct {
	sentAt     time.Time
	suppressed int
}

// Alerter raises alerts.
type Alerter struct {
	cfg    Config
	logger *slog.Logger
	client *http.Client
	now    func() time.Time
	count  *prometheus.CounterVec
	sent   *prometheus.CounterVec

	mu      sync.Mutex
	windows map[string]*window
	queue   chan Alert
}

// New returns an alerter. Call Run to deliver webhook alerts; without a
// webhook URL Run returns at once and Raise only logs and counts.
func New(cfg Config, deps lifecycle.Deps) (*Alerter, error) {
	deps = deps.WithDefaults()
	logger, reg, now := deps.Logger, deps.Registerer, deps.Clock
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.DedupeWindow == 0 {
		cfg.DedupeWindow = 5 * time.Minute
	}
	if cfg.Format == "" {
		cfg.Format = FormatGeneric
	}
	a := &Alerter{
		cfg: cfg, logger: logger.With("component", "alert"), now: now,
		client:  &http.Client{Timeout: 10 * time.Second},
		windows: map[string]*window{},
		queue:   make(chan Alert, 256),
		count: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_alerts_total", Help: "Alerts raised, by key and severity.",
		}, []string{"key", "severity"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_alert_deliveries_total", Help: "Webhook alert deliveries by result (sent, failed, dropped, suppressed).",
		}, []string{"result"}),
	}
	if err := reg.Register(a.count); err != nil {
		return nil, fmt.Errorf("register alert metrics: %w", err)
	}
	if err := reg.Register(a.sent); err != nil {
		return nil, fmt.Errorf("register alert metrics: %w", err)
	}
	return a, nil
}

// Raise records al: a log line and a metric always, a webhook delivery when
// configured and not a repeat within the de-duplication window.
func (a *Alerter) Raise(ctx context.Context, al Alert) {
	if al.At.IsZero() {
		al.At = a.now()
	}
	if al.Severity == "" {
		al.Severity = Error
	}
	level := slog.LevelWarn
	if al.Severity == Error || al.Severity == Critical {
		level = slog.LevelError
	}
	attrs := []any{"alert_key", al.Key, "severity", string(al.Severity)}
	for k, v := range al.Details {
		attrs = append(attrs, k, v)
	}
	a.logger.Log(ctx, level, "ALERT: "+al.Summary, attrs...)
	a.count.WithLabelValues(al.Key, string(al.Severity)).Inc()
	if a.cfg.WebhookURL == "" {
		return
	}
	a.mu.Lock()
	w := a.windows[al.Key]
	if w != nil && al.At.Sub(w.sentAt) < a.cfg.DedupeWindow {
		w.suppressed++
		a.mu.Unlock()
		a.sent.WithLabelValues("suppressed").Inc()
		return
	}
	if w != nil {
		al.Suppressed = w.suppressed
	}
	a.windows[al.Key] = &window{sentAt: al.At}
	a.mu.Unlock()
	select {
	case a.queue <- al:
	default:
		a.sent.WithLabelValues("dropped").Inc()
		a.logger.Error("alert queue full; webhook delivery dropped (the alert is logged above)", "alert_key", al.Key)
	}
}

// Run delivers queued alerts until ctx is done.
func (a *Alerter) Run(ctx context.Context) {
	if a.cfg.WebhookURL == "" {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case al := <-a.queue:
			a.deliver(ctx, al)
		}
	}
}

func (a *Alerter) deliver(ctx context.Context, al Alert) {
	body, err := a.body(al)
	if err != nil {
		a.logger.Error("encode alert", "error", err.Error())
		return
	}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(attempt) * time.Second):
			}
		}
		if last = a.post(ctx, body); last == nil {
			a.sent.WithLabelValues("sent").Inc()
			return
		}
	}
	a.sent.WithLabelValues("failed").Inc()
	a.logger.Error("alert webhook delivery failed", "alert_key", al.Key, "error", last.Error())
}

func (a *Alerter) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return withoutURL(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return withoutURL(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("alert webhook answered %d", resp.StatusCode)
	}
	return nil
}

// withoutURL drops the request URL net/http puts in its errors ("Post
// \"https://hooks.slack.com/services/T…/B…/secret\": dial tcp …"): the URL
// is a credential and must never reach a log line.
func withoutURL(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	if ue.Op == "parse" {
		return errors.New("the alert webhook URL does not parse")
	}
	return fmt.Errorf("%s to the alert webhook: %w", ue.Op, ue.Err)
}

func (a *Alerter) body(al Alert) ([]byte, error) {
	summary := al.Summary
	if al.Suppressed > 0 {
		summary = fmt.Sprintf("%s (+%d similar since the last notice)", summary, al.Suppressed)
	}
	switch a.cfg.Format {
	case FormatSlack:
		text := fmt.Sprintf("*[%s] %s*: %s", al.Severity, a.cfg.Source, summary)
		for k, v := range al.Details {
			text += fmt.Sprintf("\n• %s: %v", k, v)
		}
		return json.Marshal(map[string]any{"text": text})
	case FormatPagerDuty:
		return json.Marshal(map[string]any{
			"routing_key":  a.cfg.RoutingKey,
			"event_action": "trigger",
			"dedup_key":    al.Key, // the thing, not who noticed it (keys.go)
			"payload": map[string]any{
				"summary":        summary,
				"source":         a.cfg.Source,
				"severity":       string(al.Severity),
				"timestamp":      al.At.UTC().Format(time.RFC3339),
				"custom_details": al.Details,
			},
		})
	}
	return json.Marshal(map[string]any{
		"source": a.cfg.Source, "key": al.Key, "severity": al.Severity, "summary": summary,
		"details": al.Details, "suppressed": al.Suppressed, "at": al.At.UTC(),
	})
}
