package deliver

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
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/consumer"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/errclass"
	"github.com/aegis-payments/aegis/pkg/event/schema"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
)

// Defaults of the settings.
const (
	DefaultGroup       = "settlement-webhooks"
	DefaultTimeout     = 5 * time.Second
	DefaultMaxAttempts = 5
	// DefaultDeadLetterFor outlasts a Postgres failover.
	DefaultDeadLetterFor = time.Minute
	// MinSecretLength keeps a guessable secret out: HMAC is only as strong
	// as its key.
	MinSecretLength = 16
)

// DefaultBackoff spaces retries 0.5s, 1s, 2s, 4s (ceilings, full jitter),
// capped at 10s: with DefaultTimeout and DefaultMaxAttempts one event holds
// its partition for at most about 35s, within the group's rebalance timeout.
func DefaultBackoff() backoff.Policy {
	return backoff.Policy{Base: 500 * time.Millisecond, Multiplier: 2, Max: 10 * time.Second, MaxAttempts: DefaultMaxAttempts}
}

// Config is the deliverer's settings.
type Config struct {
	// URL is SETTLEMENT_WEBHOOK_URL; the deliverer is not built when empty.
	URL string
	// Secret is SETTLEMENT_WEBHOOK_SECRET, the HMAC key.
	Secret string
	// Group is SETTLEMENT_WEBHOOK_GROUP, the consumer group.
	Group   string
	Brokers []string
	// Membership and Security are shared with dlq-admin's other consumer.
	Membership kafkax.Membership
	Security   kafkax.Security
	// Timeout is SETTLEMENT_WEBHOOK_TIMEOUT: one POST, answer included.
	Timeout time.Duration
	// Backoff spaces the retries; its MaxAttempts is
	// SETTLEMENT_WEBHOOK_MAX_ATTEMPTS, the attempts in all per event.
	Backoff backoff.Policy
	// MaxPollRecords bounds one batch.
	MaxPollRecords int
	// CommitTimeout bounds one offset commit, at shutdown too.
	CommitTimeout time.Duration
	// BatchFor bounds how long one poll's events may hold rebalances: past
	// it no further event of the batch is started (each partition finishes
	// the one in hand), what is done is committed, the rest is rewound and
	// polled again. A receiver that is down therefore paces the stream but
	// never keeps partitions from moving between replicas for long.
	BatchFor time.Duration
	// DeadLetterFor is how long a dead letter's write to Postgres is
	// retried before it pages and the event is rewound (and POSTed again
	// when polled again): a short outage of Postgres does neither (default
	// DefaultDeadLetterFor).
	DeadLetterFor time.Duration
	// OnDeadLetter, if set, is called after an event became a dead letter
	// (package depth's Notify, which alerts on it). It must not block.
	OnDeadLetter func()
}

func (c Config) withDefaults() Config {
	if c.Group == "" {
		c.Group = DefaultGroup
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.DeadLetterFor <= 0 {
		c.DeadLetterFor = DefaultDeadLetterFor
	}
	if c.Backoff.Base == 0 {
		attempts := c.Backoff.MaxAttempts
		c.Backoff = DefaultBackoff()
		if attempts != 0 {
			c.Backoff.MaxAttempts = attempts
		}
	}
	if c.MaxPollRecords == 0 {
		c.MaxPollRecords = 100
	}
	if c.CommitTimeout == 0 {
		c.CommitTimeout = 10 * time.Second
	}
	if c.BatchFor == 0 {
		c.BatchFor = 30 * time.Second
	}
	return c
}

// Validate reports settings that cannot work; zero MaxPollRecords and
// CommitTimeout take their defaults. The field names map to the
// environment in dlq-admin's run.go.
func (c Config) Validate() error {
	var errs []error
	if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, config.Invalid("URL", "must be an http or https URL"))
	}
	if len(c.Secret) < MinSecretLength {
		errs = append(errs, config.Invalid("Secret", "must be at least %d characters when the URL is set", MinSecretLength))
	}
	if len(c.Brokers) == 0 {
		errs = append(errs, config.Invalid("Brokers", "must list at least one broker"))
	}
	if c.Timeout <= 0 {
		errs = append(errs, config.Invalid("Timeout", "must be positive"))
	}
	if err := c.Backoff.Validate(); err != nil {
		errs = append(errs, config.Within("Backoff", err))
	}
	if c.BatchFor < 0 {
		errs = append(errs, config.Invalid("BatchFor", "must not be negative (0 takes the default)"))
	}
	if c.MaxPollRecords < 0 {
		errs = append(errs, config.Invalid("MaxPollRecords", "must not be negative (0 takes the default)"))
	}
	return errors.Join(errs...)
}

// partitions bounds how many partitions of aegis.settlements are delivered
// at once: more than the topic has, so every partition of a poll is sent
// concurrently (the loop starts a run per partition with records only).
const partitions = 256

// notDelivered prefixes the error of every settlement dead letter.
const notDelivered = "settlement webhook not delivered: "

// Deliverer consumes aegis.settlements and delivers each event. Run it
// once; Close it after Run returned.
type Deliverer struct {
	cfg    Config
	client *kgo.Client
	http   *http.Client
	schema *schema.Validator
	logger *slog.Logger
	now    func() time.Time
	m      *metrics
	loop   *consumer.Consumer
}

// New builds the deliverer and its Kafka client; the group is joined by the
// first poll in Run. Dead letters go to pool's dead_letters table; alerts
// (nil: none) hears of one that cannot be stored.
func New(cfg Config, pool *pgxpool.Pool, alerts *alert.Alerter, deps lifecycle.Deps) (*Deliverer, error) {
	deps = deps.WithDefaults()
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("settlement webhooks: %w", err)
	}
	v, err := schema.NewSettlements()
	if err != nil {
		return nil, fmt.Errorf("settlement webhooks: %w", err)
	}
	m, err := newMetrics(deps.Registerer)
	if err != nil {
		return nil, err
	}
	writer, err := dlq.NewWriter("dlq-admin", deps)
	if err != nil {
		return nil, fmt.Errorf("settlement webhooks: %w", err)
	}
	logger := deps.Logger.With("component", "settlement-webhooks", "group", cfg.Group)
	// A new group starts with what Kafka still holds: turning webhooks on
	// delivers the retained backlog (receivers dedupe on the id).
	client, err := kafkax.NewClient(cfg.Brokers, logger, append(
		consumer.ClientOpts(cfg.Group, cfg.Membership, kafkax.TopicSettlements), cfg.Security.Opts()...)...)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{
		Timeout: cfg.Timeout,
		// A redirect is a misconfigured URL: answered, not followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	d := &Deliverer{cfg: cfg, client: client, http: hc, schema: v, logger: logger, now: deps.Clock, m: m}
	d.loop, err = consumer.New(client, d.handle, consumer.Config{
		Name: "dlq-admin/settlement-webhooks", Group: cfg.Group, MaxPollRecords: cfg.MaxPollRecords,
		Concurrency: partitions, Order: consumer.PerPartition, Backoff: cfg.Backoff,
		RetryAttempts: cfg.Backoff.MaxAttempts, RetryFor: 24 * time.Hour, Window: cfg.BatchFor, LeaveQueued: true,
		DeadLetterFor: cfg.DeadLetterFor,
		CommitTimeout: cfg.CommitTimeout,
	}, consumer.Deps{Deps: deps, Alerts: alerts, DeadLetters: consumer.Store{
		DB: pool, Group: cfg.Group, Writer: writer, OnStored: cfg.OnDeadLetter, Letter: letter}})
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("settlement webhooks: %w", err)
	}
	return d, nil
}

// letter is the dead letter of an event not delivered: the record as
// consumed, its error prefixed, and class retries_exhausted for an event
// whose transient failures outlasted SETTLEMENT_WEBHOOK_MAX_ATTEMPTS.
func letter(r *kgo.Record, group string, f dlq.Failure) dlq.Letter {
	l := consumer.Letter(r, group, f)
	l.Error = notDelivered + l.Error
	if f.Class == errclass.Transient {
		l.ErrorClass = "retries_exhausted"
	}
	return l
}

// Ping is the readiness check: Kafka answers.
func (d *Deliverer) Ping(ctx context.Context) error { return kafkax.Ping(d.client)(ctx) }

// Close leaves the group, closes the Kafka client and the receiver's idle
// connections.
func (d *Deliverer) Close() {
	d.client.Close()
	d.http.CloseIdleConnections()
}

// Run delivers until ctx is done, then returns nil once what was delivered
// is committed; the events in flight are abandoned uncommitted.
func (d *Deliverer) Run(ctx context.Context) error {
	d.logger.Info("settlement webhooks started", "url", redactURL(d.cfg.URL), "max_attempts", d.cfg.Backoff.MaxAttempts)
	err := d.loop.Run(ctx)
	d.logger.Info("settlement webhooks stopped")
	return err
}

// handle delivers r once. Its error is classed for the loop: transient
// (retried, then a dead letter of class retries_exhausted), permanent (a
// dead letter at once: an answer outside 2xx that is not worth retrying, a
// body off the contract), or ctx's when the loop stops.
func (d *Deliverer) handle(ctx context.Context, r *kgo.Record) error {
	var head struct {
		EventID string `json:"event_id"`
		Type    string `json:"type"`
	}
	_ = json.Unmarshal(r.Value, &head) // a body that is not an event fails the schema below
	if err := d.schema.Validate(r.Value); err != nil {
		return errclass.AsPermanent(err)
	}
	if err := d.post(ctx, head.EventID, head.Type, r.Value); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	d.m.delivered.WithLabelValues(head.Type).Inc()
	d.logger.InfoContext(ctx, "settlement webhook delivered", "event_id", head.EventID, "type", head.Type,
		"partition", r.Partition, "offset", r.Offset)
	return nil
}

// post sends body once. Its error is classed transient (retry) or
// permanent (errclass).
func (d *Deliverer) post(ctx context.Context, eventID, typ string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return errclass.AsPermanent(fmt.Errorf("build request: %w", err))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "aegis-settlements/1")
	req.Header.Set(HeaderEventID, eventID)
	req.Header.Set(HeaderEventType, typ)
	req.Header.Set(HeaderSignature, Sign(d.cfg.Secret, d.now(), body))
	resp, err := d.http.Do(req)
	if err != nil {
		return errclass.AsTransient(fmt.Errorf("post settlement webhook: %w", err))
	}
	defer func() { _ = resp.Body.Close() }()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // reuse the connection
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return nil
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return errclass.AsTransient(fmt.Errorf("receiver answered %d: %s", code, oneLine(snippet)))
	default:
		return errclass.AsPermanent(fmt.Errorf("receiver answered %d: %s", code, oneLine(snippet)))
	}
}

// redactURL keeps a URL's scheme, host and path for logs: its query or
// user info may carry a token.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable)"
	}
	return u.Scheme + "://" + u.Host + u.Path
}

func oneLine(b []byte) string {
	s := strconv.Quote(string(b))
	return s[1 : len(s)-1]
}

type metrics struct {
	delivered *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aegis_settlement_webhooks_delivered_total", Help: "Settlement events delivered to SETTLEMENT_WEBHOOK_URL, by type.",
	}, []string{"type"})}
	if err := reg.Register(m.delivered); err != nil {
		return nil, fmt.Errorf("register settlement webhook metrics: %w", err)
	}
	return m, nil
}
