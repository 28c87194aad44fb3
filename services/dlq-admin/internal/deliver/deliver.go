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
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/config"
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

// Deliverer consumes aegis.settlements and delivers each event. Run it
// once; Close it after Run returned.
type Deliverer struct {
	cfg    Config
	client *kgo.Client
	http   *http.Client
	pool   *pgxpool.Pool
	schema *schema.Validator
	logger *slog.Logger
	now    func() time.Time
	m      *metrics
}

// New builds the deliverer and its Kafka client; the group is joined by the
// first poll in Run. Dead letters go to pool's dead_letters table.
func New(cfg Config, pool *pgxpool.Pool, deps lifecycle.Deps) (*Deliverer, error) {
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
	logger := deps.Logger.With("component", "settlement-webhooks", "group", cfg.Group)
	client, err := kafkax.NewClient(cfg.Brokers, logger, append([]kgo.Opt{
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(kafkax.TopicSettlements),
		kgo.DisableAutoCommit(),
		// The batch in hand is finished (delivered or dead-lettered, each
		// within its bounded budget) and committed before partitions move.
		kgo.BlockRebalanceOnPoll(),
		// A new group starts with what Kafka still holds: turning webhooks
		// on delivers the retained backlog (receivers dedupe on the id).
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, append(cfg.Membership.Opts(), cfg.Security.Opts()...)...)...)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{
		Timeout: cfg.Timeout,
		// A redirect is a misconfigured URL: answered, not followed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return &Deliverer{cfg: cfg, client: client, http: hc, pool: pool, schema: v, logger: logger, now: deps.Clock, m: m}, nil
}

// Ping is the readiness check: Kafka answers.
func (d *Deliverer) Ping(ctx context.Context) error { return kafkax.Ping(d.client)(ctx) }

// Close leaves the group, closes the Kafka client and the receiver's idle
// connections.
func (d *Deliverer) Close() {
	d.client.Close()
	d.http.CloseIdleConnections()
}

// Run delivers until ctx is done, then returns nil once the batch in hand
// is committed as far as it got.
func (d *Deliverer) Run(ctx context.Context) error {
	d.logger.Info("settlement webhooks started", "url", redactURL(d.cfg.URL), "max_attempts", d.cfg.Backoff.MaxAttempts)
	for {
		fetches := d.client.PollRecords(ctx, d.cfg.MaxPollRecords)
		if fetches.IsClientClosed() {
			d.client.AllowRebalance()
			return errors.New("settlement webhooks: kafka client closed")
		}
		if ctx.Err() != nil {
			d.client.AllowRebalance()
			d.logger.Info("settlement webhooks stopped")
			return nil
		}
		fetches.EachError(func(topic string, partition int32, err error) {
			d.logger.Warn("kafka fetch failed", "topic", topic, "partition", partition, "error", err.Error())
		})
		var (
			mu     sync.Mutex
			done   []*kgo.Record
			rewind = map[string]map[int32]kgo.EpochOffset{}
			wg     sync.WaitGroup
		)
		deadline := time.Now().Add(d.cfg.BatchFor)
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) == 0 {
				return
			}
			wg.Go(func() {
				finished := d.partition(ctx, p.Records, deadline)
				mu.Lock()
				defer mu.Unlock()
				done = append(done, finished...)
				if n := len(finished); n < len(p.Records) && ctx.Err() == nil {
					next := p.Records[n]
					if rewind[next.Topic] == nil {
						rewind[next.Topic] = map[int32]kgo.EpochOffset{}
					}
					rewind[next.Topic][next.Partition] = kgo.EpochOffset{Epoch: next.LeaderEpoch, Offset: next.Offset}
				}
			})
		})
		wg.Wait()
		if len(done) > 0 {
			// Committed even while shutting down: what was delivered must
			// not be delivered again by the next member.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.cfg.CommitTimeout)
			if err := d.client.CommitRecords(cctx, done...); err != nil {
				d.logger.Warn("offset commit failed; delivered events will be delivered again", "error", err.Error())
			}
			cancel()
		}
		if len(rewind) > 0 {
			// Past BatchFor: the rest of the batch is polled again (with
			// rebalances still blocked, as SetOffsets requires).
			d.client.SetOffsets(rewind)
		}
		d.client.AllowRebalance()
	}
}

// partition delivers one partition's records in order and returns those
// finished (delivered or dead-lettered): a prefix, shorter when ctx ended
// or deadline passed (the first record is always tried).
func (d *Deliverer) partition(ctx context.Context, records []*kgo.Record, deadline time.Time) []*kgo.Record {
	for i, r := range records {
		if i > 0 && time.Now().After(deadline) {
			return records[:i]
		}
		if err := d.handle(ctx, r); err != nil {
			return records[:i]
		}
	}
	return records
}

// handle delivers r, or dead-letters it. It fails only when ctx ended
// first.
func (d *Deliverer) handle(ctx context.Context, r *kgo.Record) error {
	var head struct {
		EventID string `json:"event_id"`
		Type    string `json:"type"`
	}
	_ = json.Unmarshal(r.Value, &head) // a body that is not an event fails the schema below
	log := d.logger.With("event_id", head.EventID, "type", head.Type, "partition", r.Partition, "offset", r.Offset,
		"correlation_id", kafkax.Header(r, kafkax.HeaderCorrelationID))
	if err := d.schema.Validate(r.Value); err != nil {
		return d.deadLetter(ctx, log, r, errclass.AsPermanent(err), nil)
	}
	var history []dlq.Attempt
	for attempt := 1; ; attempt++ {
		err := d.post(ctx, head.EventID, head.Type, r.Value)
		if err == nil {
			d.m.delivered.WithLabelValues(head.Type).Inc()
			log.Info("settlement webhook delivered", "attempts", attempt)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		class := errclass.Of(err)
		history = append(history, dlq.Attempt{At: d.now().UTC(), Error: err.Error(), Class: string(class)})
		if class != errclass.Transient || d.cfg.Backoff.Exhausted(attempt) {
			return d.deadLetter(ctx, log, r, err, history)
		}
		d.m.retried.Inc()
		wait := d.cfg.Backoff.Delay(attempt)
		log.Warn("settlement webhook failed; retrying", "attempt", attempt, "retry_in", wait.String(), "error", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
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

// deadLetter stores r in dead_letters as a consumer letter of this group,
// retrying while Postgres cannot take it (there is nowhere safer for it);
// it fails only when ctx ends first, leaving r uncommitted.
func (d *Deliverer) deadLetter(ctx context.Context, log *slog.Logger, r *kgo.Record, cause error, history []dlq.Attempt) error {
	class := errclass.Of(cause)
	if class == errclass.Transient {
		class = "retries_exhausted"
	}
	now := d.now().UTC()
	first := now
	if len(history) > 0 {
		first = history[0].At
	}
	part, off := r.Partition, r.Offset
	headers := make(map[string]string, len(r.Headers))
	for _, h := range r.Headers {
		headers[h.Key] = string(h.Value)
	}
	l := dlq.Letter{Source: dlq.SourceConsumer, OriginalTopic: r.Topic, OriginalPartition: &part, OriginalOffset: &off,
		ConsumerGroup: d.cfg.Group, PartitionKey: string(r.Key), EventType: headers[kafkax.HeaderEventType],
		Payload: r.Value, Headers: headers, Error: "settlement webhook not delivered: " + cause.Error(),
		ErrorClass: string(class), RetryCount: len(history), RetryHistory: history, FirstFailureAt: first,
		FailedAt: now, CorrelationID: headers[kafkax.HeaderCorrelationID]}
	wait := d.cfg.Backoff
	wait.MaxAttempts = 1
	for try := 1; ; try++ {
		_, inserted, err := dlq.Insert(ctx, d.pool, l)
		if err == nil {
			d.m.deadLettered.WithLabelValues(string(class)).Inc()
			log.Error("settlement webhook dead-lettered", "error_class", string(class), "attempts", len(history), "error", cause.Error())
			if inserted && d.cfg.OnDeadLetter != nil {
				d.cfg.OnDeadLetter()
			}
			return nil
		}
		log.Warn("storing a settlement dead letter failed; retrying", "error", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait.Delay(try)):
		}
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
	delivered    *prometheus.CounterVec
	retried      prometheus.Counter
	deadLettered *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_settlement_webhooks_delivered_total", Help: "Settlement events delivered to SETTLEMENT_WEBHOOK_URL, by type.",
		}, []string{"type"}),
		retried: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aegis_settlement_webhook_retries_total", Help: "Settlement webhook attempts that failed and were retried.",
		}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aegis_settlement_webhooks_dead_lettered_total", Help: "Settlement events given up and stored as dead letters, by error class.",
		}, []string{"error_class"}),
	}
	for _, c := range []prometheus.Collector{m.delivered, m.retried, m.deadLettered} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register settlement webhook metrics: %w", err)
		}
	}
	return m, nil
}
