package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	goredis "github.com/redis/go-redis/v9"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/breaker"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/panics"
	"github.com/aegis-payments/aegis/pkg/paystackapi"
	"github.com/aegis-payments/aegis/pkg/service"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
	"github.com/aegis-payments/aegis/pkg/telemetry"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/consume"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/fees"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/handler"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/ledger"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/payout"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/psp"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/walletlock"
)

// Config is payout-worker's settings.
type Config struct {
	service.Base
	// RedisURLs is REDIS_URLS, or REDIS_URL alone: the wallet locks' nodes.
	RedisURLs []string
	// RedisRootCAs is REDIS_TLS_CA_FILE: the CAs that sign rediss:// nodes
	// (nil: the system's).
	RedisRootCAs *x509.CertPool
	KafkaBrokers []string
	Group        string
	Membership   kafkax.Membership
	// KafkaSecurity is KAFKA_TLS*, KAFKA_SASL_*.
	KafkaSecurity   kafkax.Security
	MaxPollRecords  int
	Concurrency     int
	RetryAttempts   int
	RetryFor        time.Duration
	DBMaxConns      int
	StripeSecretKey string
	StripeAPIBase   string
	PaystackKey     string
	PaystackAPIBase string
	Payout          payout.Config
	Sweep           payout.SweepConfig
	// Fees is the Stripe fee collector (PSP_FEE_INTERVAL).
	Fees fees.Config
	// SettlementDelay is CREDIT_SETTLEMENT_DELAY: how long after a credit
	// its money can be paid out (0, the default: at once).
	SettlementDelay time.Duration
	// CreditWait is MONEY_BACK_CREDIT_WAIT: how long a refund or dispute
	// that arrives before its payment's credit waits for it before it is
	// dead-lettered (0: at once; never shorter than the PSP reconciliation
	// needs to recover the payment, config.MoneyBackTiming).
	CreditWait time.Duration
	Breaker    breaker.Config
	Lock       walletlock.Config
	Alert      alert.Config
	// EventProof verifies that webhook-api signed each money event
	// (AEGIS_EVENT_SIGNING_KEY, AEGIS_EVENT_SIGNING_KEY_PREVIOUS).
	EventProof *eventproof.Keys
}

// readConfig reads payout-worker's settings (with service.ReadBase's, the
// kafkax and alert readers', eventproof.Read's and the money-back timing):
//
//	REDIS_URL                       the Redis of the wallet locks (rediss:// for TLS)
//	REDIS_URLS                      three or more independent Redis nodes instead, comma-separated: a wallet
//	                                lock is held while a majority grants it (Redlock), so a minority may fail;
//	                                two are refused
//	REDIS_TLS_CA_FILE               PEM CAs that sign the rediss:// nodes (default: the system's)
//	CONSUMER_GROUP                  the worker's Kafka consumer group
//	WORKER_MAX_POLL_RECORDS         records per poll; polling goes on while records are in flight (up to twice this)
//	WORKER_CONCURRENCY              wallets handled at once (each wallet's records stay in order)
//	WORKER_RETRY_IN_PLACE_ATTEMPTS  attempts of a record failing transiently (Postgres or Redis down) before it is
//	                                dead-lettered as transient
//	WORKER_RETRY_IN_PLACE_FOR       the longest a record is retried in place, whichever bound comes first
//	CREDIT_SETTLEMENT_DELAY         how long after a credit its money can be paid out (it is in the wallet at
//	                                once); 0: at once (docs/reference/accounting.md)
//	STRIPE_SECRET_KEY               Stripe's secret key: payouts and lookups here, the PSP reconciliation and
//	                                destination checks in webhook-api; livemode is expected only with sk_live_/rk_live_ keys
//	STRIPE_API_BASE                 Stripe's API URL (default Stripe's own; a local stand-in in tests)
//	PAYSTACK_SECRET_KEY             Paystack's secret key: transfers here, webhook signatures, the PSP
//	                                reconciliation and destination checks in webhook-api, OTP entry in dlq-admin;
//	                                unset: Paystack is off
//	PAYSTACK_API_BASE               Paystack's API URL (default Paystack's own)
//	WALLET_LOCK_EXPIRY              the wallet lock's expiry, renewed at half of it while the work runs
//	WALLET_LOCK_WAIT                how long a delivery waits for a busy wallet's lock
//	PSP_BACKOFF_BASE                the first delay before a payout's PSP call is retried (exponential, full jitter)
//	PSP_BACKOFF_MULTIPLIER          the growth of each next delay
//	PSP_BACKOFF_MAX                 the longest delay
//	PSP_MAX_ATTEMPTS                PSP calls of a payout before it fails (or, outcome unknown, NEEDS_REVIEW)
//	PSP_BREAKER_DEFER               how long a payout waits while its PSP's breaker is open (default
//	                                BREAKER_OPEN_FOR); no attempt is spent
//	PSP_CALL_TIMEOUT                one PSP call's limit
//	PSP_IDEMPOTENCY_WINDOW          how long the PSP is trusted to remember an Idempotency-Key (Stripe: 24 hours);
//	                                a payout whose first attempt is older is looked up before anything is sent again
//	PSP_SETTLE_WINDOW               how long after a request whose outcome is unknown the PSP may still execute it;
//	                                until then a lookup that finds nothing neither sends again nor releases the
//	                                hold (must exceed PSP_CALL_TIMEOUT; docs/guides/payouts.md)
//	PAYOUT_CHECK_AFTER              a payout waiting at the PSP this long since its last step or lookup is looked
//	                                up there and finished from the PSP's record
//	PAYOUT_SWEEP_INTERVAL           how often the payout sweeper runs (one replica at a time)
//	PAYOUT_SWEEP_BATCH              payouts one sweep looks up, and handles per state past its deadline
//	PSP_FEE_INTERVAL                how often Stripe's fees are read from its balance transactions and posted to
//	                                the ledger (one replica at a time; with STRIPE_SECRET_KEY)
//	PAYOUT_DEADLINE_INITIALIZED     an INITIALIZED payout this old has its command published again, once
//	PAYOUT_DEADLINE_SENDING         a SENDING_TO_GATEWAY payout this old is resumed through a retry that looks it
//	                                up first; a second stall goes to NEEDS_REVIEW
//	PAYOUT_DEADLINE_RETRYING        a RETRYING payout this old has its retry published again, once; a second stall
//	                                goes to NEEDS_REVIEW
//	PAYOUT_PENDING_ESCALATE_AFTER   a payout still pending at the PSP this long after it was sent goes to
//	                                NEEDS_REVIEW, hold kept (Stripe: final within 5 business days)
//	PAYOUT_REVIEW_DEADLINE          a NEEDS_REVIEW payout older than this is overdue (aegis_payout_overdue, an alert)
func readConfig(getenv func(string) string) (Config, error) {
	env := config.New(getenv)
	c := Config{
		Base:            service.ReadBase(env, "payout-worker", ":8082"),
		RedisURLs:       env.List("REDIS_URLS"),
		KafkaBrokers:    env.List("KAFKA_BROKERS"),
		Group:           env.String("CONSUMER_GROUP", "payout-worker"),
		MaxPollRecords:  env.Int("WORKER_MAX_POLL_RECORDS", 500),
		Concurrency:     env.Int("WORKER_CONCURRENCY", 32),
		RetryAttempts:   env.Int("WORKER_RETRY_IN_PLACE_ATTEMPTS", 20),
		RetryFor:        env.Duration("WORKER_RETRY_IN_PLACE_FOR", time.Minute),
		DBMaxConns:      env.Int("DB_MAX_CONNS", 24),
		SettlementDelay: env.Duration("CREDIT_SETTLEMENT_DELAY", 0),
		StripeSecretKey: env.String("STRIPE_SECRET_KEY", ""),
		StripeAPIBase:   env.String("STRIPE_API_BASE", ""),
		PaystackKey:     env.String("PAYSTACK_SECRET_KEY", ""),
		PaystackAPIBase: env.String("PAYSTACK_API_BASE", ""),
		Breaker: breaker.Config{
			ConsecutiveFailures: env.Uint32("BREAKER_FAILURES", 5),
			OpenFor:             env.Duration("BREAKER_OPEN_FOR", 30*time.Second),
			HalfOpenProbes:      1,
		},
		Lock: walletlock.Config{
			Expiry: env.Duration("WALLET_LOCK_EXPIRY", 10*time.Second),
			Wait:   env.Duration("WALLET_LOCK_WAIT", 5*time.Second),
		},
	}
	// The wait outlasts the PSP reconciliation that recovers a lost payment
	// (config.MoneyBackTiming: derived from PSP_RECONCILE_INTERVAL, which
	// the deploy manifests set once for every service).
	c.CreditWait = env.MoneyBackTiming().CreditWait
	c.Membership = kafkax.ReadMembership(env)
	c.KafkaSecurity = kafkax.ReadSecurity(env)
	c.Alert = alert.ReadConfig(env, "payout-worker")
	c.EventProof = eventproof.Read(env)
	c.Payout = payout.Config{
		Backoff: backoff.Policy{
			Base:        env.Duration("PSP_BACKOFF_BASE", 5*time.Second),
			Multiplier:  env.Float("PSP_BACKOFF_MULTIPLIER", 2),
			Max:         env.Duration("PSP_BACKOFF_MAX", 60*time.Second),
			MaxAttempts: env.Int("PSP_MAX_ATTEMPTS", 5),
		},
		BreakerDefer: env.Duration("PSP_BREAKER_DEFER", c.Breaker.OpenFor),
		CallTimeout:  env.Duration("PSP_CALL_TIMEOUT", 30*time.Second),
		// Stripe keeps an Idempotency-Key for 24 hours; an hour's margin.
		IdempotencyWindow: env.Duration("PSP_IDEMPOTENCY_WINDOW", 23*time.Hour),
		// How long the PSP may still execute a request we stopped waiting
		// for (docs/guides/payouts.md, "Unknown outcomes are never reversed"): stripe-go itself waits 80s.
		SettleWindow:   env.Duration("PSP_SETTLE_WINDOW", 2*time.Minute),
		StripeLivemode: strings.HasPrefix(c.StripeSecretKey, "sk_live_") || strings.HasPrefix(c.StripeSecretKey, "rk_live_"),
	}
	c.Fees = fees.DefaultConfig()
	if c.Fees.Every = env.Duration("PSP_FEE_INTERVAL", c.Fees.Every); c.Fees.Every <= 0 {
		env.Errorf("PSP_FEE_INTERVAL must be positive")
	}
	c.Sweep = payout.SweepConfig{
		// A Stripe payout is normally pending for a day or two; its
		// payout.paid may be lost. Looked up every half hour meanwhile.
		After: env.Duration("PAYOUT_CHECK_AFTER", 30*time.Minute),
		Every: env.Duration("PAYOUT_SWEEP_INTERVAL", time.Minute),
		Batch: env.Int("PAYOUT_SWEEP_BATCH", 200),
		// Every unfinished state's longest wait (payout.Deadlines says what
		// each bounds and what happens past it; the age alerts in
		// services/dlq-admin/alerts/prometheus-rules.yml use these values).
		// Each default exceeds what it waits for, with the defaults above:
		Deadlines: payout.Deadlines{
			// the command's way to the worker, in-place retries (1m) included;
			Initialized: env.Duration("PAYOUT_DEADLINE_INITIALIZED", 30*time.Minute),
			// in-place retries (1m) plus two deliveries of three 30s calls (3m);
			Sending: env.Duration("PAYOUT_DEADLINE_SENDING", 15*time.Minute),
			// the longest defer we schedule (the 2m settle window; backoff
			// cap 60s, breaker 30s) plus in-place retries (1m);
			Retrying: env.Duration("PAYOUT_DEADLINE_RETRYING", 30*time.Minute),
			// Stripe: paid, failed or canceled within 5 business days, so
			// ten calendar days (weekend, bank holidays), far above
			// PAYOUT_CHECK_AFTER;
			Pending: env.Duration("PAYOUT_PENDING_ESCALATE_AFTER", 240*time.Hour),
			// a person's answer within a day.
			Review: env.Duration("PAYOUT_REVIEW_DEADLINE", 24*time.Hour),
		},
	}
	if len(c.KafkaBrokers) == 0 {
		c.KafkaBrokers = []string{"127.0.0.1:9092"}
	}
	if c.SettlementDelay < 0 {
		env.Errorf("CREDIT_SETTLEMENT_DELAY must not be negative")
	}
	if c.MaxPollRecords < 1 {
		env.Errorf("WORKER_MAX_POLL_RECORDS must be at least 1")
	}
	if c.Concurrency < 1 {
		env.Errorf("WORKER_CONCURRENCY must be at least 1")
	}
	if c.RetryAttempts < 1 {
		env.Errorf("WORKER_RETRY_IN_PLACE_ATTEMPTS must be at least 1")
	}
	if c.RetryFor <= 0 {
		env.Errorf("WORKER_RETRY_IN_PLACE_FOR must be positive")
	}
	if c.DBMaxConns < 2 {
		env.Errorf("DB_MAX_CONNS must be at least 2")
	}
	redisVar := "REDIS_URLS"
	switch len(c.RedisURLs) {
	case 0:
		redisVar = "REDIS_URL"
		c.RedisURLs = []string{env.String("REDIS_URL", "redis://127.0.0.1:6379/0")}
	case 2:
		// A quorum of two is both nodes: losing either stops every payout.
		env.Errorf("REDIS_URLS needs one node or at least three independent ones (Redlock quorum), got 2")
	}
	if caFile, ok := env.Lookup("REDIS_TLS_CA_FILE"); ok {
		pem, err := os.ReadFile(caFile)
		c.RedisRootCAs = x509.NewCertPool()
		if err != nil {
			env.Errorf("REDIS_TLS_CA_FILE: %v", err)
		} else if !c.RedisRootCAs.AppendCertsFromPEM(pem) {
			env.Errorf("REDIS_TLS_CA_FILE %s holds no PEM certificate", caFile)
		}
	}
	for i, u := range c.RedisURLs {
		if opts, err := goredis.ParseURL(u); err == nil && c.RedisRootCAs != nil && opts.TLSConfig == nil {
			env.Errorf("REDIS_TLS_CA_FILE is set but %s node %d is not rediss://", redisVar, i+1)
		}
		if _, err := goredis.ParseURL(u); err != nil {
			// The error names the variable and position, never the URL:
			// it may carry a password.
			env.Errorf("%s: node %d: %v", redisVar, i+1, redactRedisErr(err, u))
		}
	}
	env.Check(c.Payout.Validate(), map[string]string{
		"Backoff.Base":        "PSP_BACKOFF_BASE",
		"Backoff.Multiplier":  "PSP_BACKOFF_MULTIPLIER",
		"Backoff.Max":         "PSP_BACKOFF_MAX",
		"Backoff.MaxAttempts": "PSP_MAX_ATTEMPTS",
		"BreakerDefer":        "PSP_BREAKER_DEFER",
		"CallTimeout":         "PSP_CALL_TIMEOUT",
		"IdempotencyWindow":   "PSP_IDEMPOTENCY_WINDOW",
		"SettleWindow":        "PSP_SETTLE_WINDOW",
	})
	env.Check(c.Sweep.Validate(c.Payout, c.RetryFor), map[string]string{
		"After":                 "PAYOUT_CHECK_AFTER",
		"Every":                 "PAYOUT_SWEEP_INTERVAL",
		"Batch":                 "PAYOUT_SWEEP_BATCH",
		"Deadlines.Initialized": "PAYOUT_DEADLINE_INITIALIZED",
		"Deadlines.Sending":     "PAYOUT_DEADLINE_SENDING",
		"Deadlines.Retrying":    "PAYOUT_DEADLINE_RETRYING",
		"Deadlines.Pending":     "PAYOUT_PENDING_ESCALATE_AFTER",
		"Deadlines.Review":      "PAYOUT_REVIEW_DEADLINE",
		"InPlace":               "WORKER_RETRY_IN_PLACE_FOR",
		"CallTimeout":           "PSP_CALL_TIMEOUT",
		"Backoff.Max":           "PSP_BACKOFF_MAX",
		"BreakerDefer":          "PSP_BREAKER_DEFER",
		"SettleWindow":          "PSP_SETTLE_WINDOW",
	})
	env.Check(c.Breaker.Validate(), map[string]string{
		"ConsecutiveFailures": "BREAKER_FAILURES",
		"OpenFor":             "BREAKER_OPEN_FOR",
	})
	if c.Lock.Expiry < time.Second {
		env.Errorf("WALLET_LOCK_EXPIRY must be at least 1s")
	}
	return c, env.Err()
}

// creditCommitters is how many credit groups are committed at once
// (ledger.CreditCommitter), measured on the worker bench: see
// docs/reports/benchmarks.md, "Worker: credits against a pgbench of the same batch".
// Two kept the worker bench's backlog fast but made a credit wait behind the
// groups in flight at e2e rates (kafka+worker p50 209 ms against 55 ms
// before the group commit); eight keep both.
const creditCommitters = 8

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := readConfig(getenv)
	if err != nil {
		return err
	}
	logger := cfg.Logger(stdout)
	stopTracing, err := cfg.StartTracing(ctx, getenv, logger)
	if err != nil {
		return err
	}
	defer stopTracing() // last: flushes the spans of the shutdown too

	reg := httpserver.NewRegistry()
	pool, err := database.Connect(ctx, cfg.DatabaseURL, database.Options{MaxConns: int32(cfg.DBMaxConns), ApplicationName: cfg.Name,
		Registerer: reg})
	if err != nil {
		return err
	}
	defer pool.Close()

	nodes := make([]goredis.UniversalClient, 0, len(cfg.RedisURLs))
	for i, u := range cfg.RedisURLs {
		opts, err := goredis.ParseURL(u)
		if err != nil {
			return fmt.Errorf("redis node %d: %w", i+1, redactRedisErr(err, u))
		}
		if opts.TLSConfig != nil && cfg.RedisRootCAs != nil {
			opts.TLSConfig.RootCAs = cfg.RedisRootCAs
		}
		rdb := goredis.NewClient(opts)
		defer rdb.Close()
		if err := instrumentRedis(rdb); err != nil {
			return fmt.Errorf("redis node %d tracing: %w", i+1, err)
		}
		nodes = append(nodes, rdb)
	}

	kafka, err := kafkax.NewClient(cfg.KafkaBrokers, logger, append(consume.ClientOpts(cfg.Group, cfg.Membership,
		kafkax.TopicWebhookPending, kafkax.TopicTransactions), append(cfg.KafkaSecurity.Opts(),
		kafkax.Metrics(reg, "consumer", logger))...)...)
	if err != nil {
		return err
	}
	defer kafka.Close()

	panicked := panics.NewCounter(reg)
	deps := lifecycle.Deps{Logger: logger, Clock: time.Now, Registerer: reg, Panics: panicked}
	apis := newPSPAPIs(cfg)
	calls, err := psp.NewCallMetrics(reg)
	if err != nil {
		return err
	}
	psps, err := pspRegistry(cfg, apis, logger, breaker.NewMetrics(reg), calls)
	if err != nil {
		return err
	}
	locks, err := walletlock.New(cfg.Lock, logger, nodes...)
	if err != nil {
		return err
	}
	alerts, err := alert.New(cfg.Alert, deps)
	if err != nil {
		return err
	}
	letters, err := dlq.NewWriter("payout-worker", deps)
	if err != nil {
		return err
	}
	l := ledger.New(pool).WithSettlementDelay(cfg.SettlementDelay)
	proc, err := payout.New(cfg.Payout, payout.Deps{Deps: deps, Pool: pool, Ledger: l, PSPs: psps, Locks: locks, Letters: letters})
	if err != nil {
		return err
	}
	if err := payout.RegisterAgeGauges(pool, cfg.Sweep.Deadlines, deps); err != nil {
		return err
	}
	if err := payout.RegisterReceivableGauge(pool, deps); err != nil {
		return err
	}
	credits, err := ledger.NewCreditCommitter(l, pool, ledger.CreditCommitterConfig{Workers: creditCommitters}, deps)
	if err != nil {
		return err
	}
	jobs := []lifecycle.Component{credits, lifecycle.Supervised("payout-worker/sweeper", deps, func(ctx context.Context) error {
		proc.RunSweeper(ctx, cfg.Sweep)
		return nil
	})}
	if apis.stripe != nil {
		collector, err := fees.New(apis.stripe, pool, l, cfg.Fees, logger, reg, time.Now)
		if err != nil {
			return err
		}
		jobs = append(jobs, lifecycle.Supervised("payout-worker/stripe-fees", deps, collector.Run))
	}
	notifier := outbox.NewNotifier(pool, outbox.NotifyInterval, logger)
	h := handler.New(handler.Deps{Deps: deps, Pool: pool, Ledger: l, Credits: credits, Payouts: proc, Alerts: alerts, Letters: letters, Notify: notifier,
		CreditWait: cfg.CreditWait, StripeLivemode: cfg.Payout.StripeLivemode, Proof: cfg.EventProof})
	consumer, err := consume.New(kafka, h, consume.Config{
		Group: cfg.Group, MaxPollRecords: cfg.MaxPollRecords, Concurrency: cfg.Concurrency, Grace: cfg.ShutdownGrace,
		InfraBackoff:         backoff.Policy{Base: 200 * time.Millisecond, Multiplier: 2, Max: 10 * time.Second, MaxAttempts: 1},
		RetryInPlaceAttempts: cfg.RetryAttempts, RetryInPlaceFor: cfg.RetryFor,
	}, consume.Deps{Deps: deps, Alerts: alerts, Letters: letters})
	if err != nil {
		return err
	}

	router, admin := cfg.Routers(logger, reg,
		httpserver.Check{Name: "postgres", Check: database.Ping(pool)},
		httpserver.Check{Name: "redis", Check: locks.Ping},
		httpserver.Check{Name: "kafka", Check: kafkax.Ping(kafka)},
	)
	logger.Info("payout worker started", "group", cfg.Group, "kafka_security", cfg.KafkaSecurity.String(), "providers", providerNames(psps),
		"redis_nodes", len(nodes), "lock_quorum", locks.Quorum())
	return cfg.Run(ctx, logger,
		// Stop taking work: the consumer finishes its in-flight records and
		// commits them (within its own grace), the HTTP server drains;
		lifecycle.Stage{Name: "intake", Components: append(cfg.Listeners(router, admin, logger),
			lifecycle.Func("payout-worker/consumer", consumer.Run))},
		// the sweeper finishes its lookup and the fee collector its round
		// (a panic in a background loop restarts that loop, not the
		// process), and the credit committers commit what the consumer left
		// queued;
		lifecycle.Stage{Name: "jobs", Components: jobs},
		// then leave the group so partitions move at once, after the last
		// commit, and stop what the handlers handed work to.
		lifecycle.Stage{Name: "flush", Components: []lifecycle.Component{
			lifecycle.OnStop("payout-worker/leave group", func(context.Context) error { kafka.LeaveGroup(); return nil }),
			lifecycle.Supervised("payout-worker/notifier", deps, notifier.Run),
		}},
	)
}

// pspAPIs is the one client of each PSP with a secret key (nil without).
type pspAPIs struct {
	stripe   *stripeapi.Client
	paystack *paystackapi.Client
}

func newPSPAPIs(cfg Config) pspAPIs {
	// otelhttp: each PSP call is a client span of the payout's trace, and
	// carries its traceparent.
	httpClient := &http.Client{Transport: otelhttp.NewTransport(&http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 5 * time.Second,
	})}
	var a pspAPIs
	if cfg.StripeSecretKey != "" {
		a.stripe = stripeapi.New(cfg.StripeSecretKey, cfg.StripeAPIBase, httpClient)
	}
	if cfg.PaystackKey != "" {
		a.paystack = paystackapi.New(cfg.PaystackKey, cfg.PaystackAPIBase, httpClient)
	}
	return a
}

// pspRegistry is each configured PSP's client, timed (calls) behind its
// breaker (m).
func pspRegistry(cfg Config, apis pspAPIs, logger *slog.Logger, m *breaker.Metrics, calls *psp.CallMetrics) (psp.Registry, error) {
	clients := map[string]psp.Client{}
	if apis.stripe != nil {
		clients["stripe"] = psp.NewStripe(apis.stripe)
	} else {
		logger.Warn("STRIPE_SECRET_KEY is not set: Stripe payouts fail and their holds are released, " +
			"and live-mode Stripe credits, refunds and disputes are refused (evidence_mismatch): the key sets the mode")
	}
	if apis.paystack != nil {
		clients["paystack"] = psp.NewPaystack(apis.paystack)
	} else {
		logger.Warn("PAYSTACK_SECRET_KEY is not set: Paystack payouts fail and their holds are released")
	}
	reg := psp.Registry{}
	for name, c := range clients {
		bc := cfg.Breaker
		bc.Name = "psp:" + name
		br, err := breaker.New[psp.Result](bc, logger, m)
		if err != nil {
			return nil, err
		}
		reg[name] = psp.WithBreaker(psp.Timed(c, calls), br)
	}
	return reg, nil
}

// instrumentRedis makes rdb's commands spans of the trace they run in
// (none outside one: telemetry.ChildOnly), named by command, without their
// arguments (lock tokens). Nothing with tracing off.
func instrumentRedis(rdb *goredis.Client) error {
	if !telemetry.On() {
		return nil
	}
	return redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(telemetry.ChildOnly(otel.GetTracerProvider())),
		redisotel.WithDBStatement(false), redisotel.WithCallerEnabled(false))
}

func providerNames(r psp.Registry) []string {
	var out []string
	for name := range r {
		out = append(out, name)
	}
	return out
}

// redactRedisErr keeps url's password out of a parse error that quotes it.
func redactRedisErr(err error, url string) error {
	u, perr := neturl.Parse(url)
	if perr != nil || u.User == nil {
		return err
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		return errors.New(strings.ReplaceAll(err.Error(), pw, "xxxxx"))
	}
	return err
}
