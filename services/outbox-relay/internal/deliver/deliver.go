package deliver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/consumer"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/event/schema"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/services/outbox-relay/internal/deliver/sqlcdb"
)

// Deps is what a Deliverer works with besides its Config.
type Deps struct {
	lifecycle.Deps
	// Pool is the relay's Postgres (role aegis_outbox_relay).
	Pool *pgxpool.Pool
	// Alerts raises the endpoint-disabled alert; nil: logged only.
	Alerts *alert.Alerter
	// Tracing makes the attempts' spans (nil: OpenTelemetry's global
	// provider, which pkg/telemetry sets up).
	Tracing trace.TracerProvider
}

// Deliverer is outbound delivery in one relay process: the intake
// (RunIntake), the dispatcher (RunDispatch) and the health, retention and
// stats loops. Close it after they returned.
type Deliverer struct {
	cfg    Config
	pool   *pgxpool.Pool
	q      *sqlcdb.Queries
	logger *slog.Logger
	now    func() time.Time
	m      *metrics
	alerts *alert.Alerter
	http   *http.Client
	tracer trace.Tracer
	schema *schema.Validator
	client *kgo.Client
	intake *consumer.Consumer
	wake   chan struct{}

	mu       sync.Mutex
	inFlight map[uuid.UUID]int
	total    int
}

// New builds the deliverer and its Kafka consumer client (the group is
// joined by RunIntake's first poll).
func New(cfg Config, deps Deps) (*Deliverer, error) {
	common := deps.WithDefaults()
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("outbound delivery: %w", err)
	}
	v, err := schema.NewSettlements()
	if err != nil {
		return nil, fmt.Errorf("outbound delivery: %w", err)
	}
	m, err := newMetrics(common.Registerer)
	if err != nil {
		return nil, err
	}
	writer, err := dlq.NewWriter("outbox-relay", common)
	if err != nil {
		return nil, fmt.Errorf("outbound delivery: %w", err)
	}
	logger := common.Logger.With("component", "outbound")
	d := &Deliverer{
		cfg: cfg, pool: deps.Pool, q: sqlcdb.New(deps.Pool), logger: logger, now: common.Clock, m: m,
		alerts: deps.Alerts, http: newHTTPClient(cfg), schema: v,
		wake:     make(chan struct{}, 1),
		inFlight: map[uuid.UUID]int{},
	}
	tp := deps.Tracing
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	d.tracer = tp.Tracer("github.com/aegis-payments/aegis/services/outbox-relay/internal/deliver")
	// A new group starts at the oldest record Kafka holds: turning delivery
	// on takes in the retained backlog (event ids make it idempotent).
	d.client, err = kafkax.NewClient(cfg.Brokers, logger, append(
		consumer.ClientOpts(cfg.Group, cfg.Membership, kafkax.TopicSettlements), append(cfg.Security.Opts(),
			kafkax.Metrics(common.Registerer, "outbound", logger))...)...)
	if err != nil {
		return nil, fmt.Errorf("outbound delivery: %w", err)
	}
	d.intake, err = consumer.New(d.client, d.take, consumer.Config{
		Name: "outbox-relay/outbound-intake", Group: cfg.Group, MaxPollRecords: cfg.MaxPollRecords,
		// PerKey (the topic's key is the user): a user's events take their
		// sequence numbers one at a time, in topic order.
		Order: consumer.PerKey, Concurrency: 16,
	}, consumer.Deps{Deps: common, Alerts: deps.Alerts, DeadLetters: consumer.Store{
		DB: deps.Pool, Group: cfg.Group, Writer: writer}})
	if err != nil {
		d.client.Close()
		return nil, fmt.Errorf("outbound delivery: %w", err)
	}
	return d, nil
}

// newHTTPClient is the receivers' client: no proxy, no redirect followed,
// every connection's address checked by the policy after DNS (a name that
// rebinds to a private address is refused at connect time).
func newHTTPClient(cfg Config) *http.Client {
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second, ControlContext: cfg.Policy.Control}
	return &http.Client{
		Timeout: cfg.Timeout,
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            dialer.DialContext,
			ForceAttemptHTTP2:      true,
			TLSHandshakeTimeout:    10 * time.Second,
			MaxIdleConnsPerHost:    cfg.PerEndpoint,
			IdleConnTimeout:        90 * time.Second,
			MaxResponseHeaderBytes: 64 << 10,
		},
		// A redirect is answered, not followed: it would leave the URL the
		// operator registered (and checked).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Ping is a readiness check: Kafka answers.
func (d *Deliverer) Ping(ctx context.Context) error { return kafkax.Ping(d.client)(ctx) }

// Close leaves the group, closes the Kafka client and the receivers' idle
// connections.
func (d *Deliverer) Close() {
	d.client.Close()
	d.http.CloseIdleConnections()
}

// Wake makes the dispatcher look for due deliveries now.
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}
