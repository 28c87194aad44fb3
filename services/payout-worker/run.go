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

	goredis "github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/backoff"
	"github.com/aegis-payments/aegis/pkg/breaker"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/panics"
	"github.com/aegis-payments/aegis/pkg/service"
	"github.com/aegis-payments/aegis/services/payout-worker/internal/consume"
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
	PlantPoison     bool
	DBMaxConns      int
	StripeSecretKey string
	StripeAPIBase   string
	PaystackKey     string
	PaystackAPIBase string
	Payout          payout.Config
	Breaker         breaker.Config
	Lock            walletlock.Config
	Alert           alert.Config
}

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
		PlantPoison:     env.Bool("WORKER_PLANT_POISON_RETRY", false),
		DBMaxConns:      env.Int("DB_MAX_CONNS", 24),
		StripeSecretKey: env.String("STRIPE_SECRET_KEY", ""),
		StripeAPIBase:   env.String("STRIPE_API_BASE", ""),
		PaystackKey:     env.String("PAYSTACK_SECRET_KEY", ""),
		PaystackAPIBase: env.String("PAYSTACK_API_BASE", ""),
		Breaker: breaker.Config{
			ConsecutiveFailures: uint32(env.Int("BREAKER_FAILURES", 5)),
			OpenFor:             env.Duration("BREAKER_OPEN_FOR", 30*time.Second),
			HalfOpenProbes:      1,
		},
		Lock: walletlock.Config{
			Expiry: env.Duration("WALLET_LOCK_EXPIRY", 10*time.Second),
			Wait:   env.Duration("WALLET_LOCK_WAIT", 5*time.Second),
		},
	}
	c.Membership = kafkax.ReadMembership(env)
	c.KafkaSecurity = kafkax.ReadSecurity(env)
	c.Alert = alert.ReadConfig(env, "payout-worker")
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
		// for (README: "Unknown outcomes"): stripe-go itself waits 80s.
		SettleWindow:   env.Duration("PSP_SETTLE_WINDOW", 2*time.Minute),
		StripeLivemode: strings.HasPrefix(c.StripeSecretKey, "sk_live_") || strings.HasPrefix(c.StripeSecretKey, "rk_live_"),
	}
	if len(c.KafkaBrokers) == 0 {
		c.KafkaBrokers = []string{"127.0.0.1:9092"}
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
	if err := c.Payout.Validate(); err != nil {
		env.Errorf("%v", err)
	}
	if err := c.Breaker.Validate(); err != nil {
		env.Errorf("BREAKER_*: %v", err)
	}
	if c.Lock.Expiry < time.Second {
		env.Errorf("WALLET_LOCK_EXPIRY must be at least 1s")
	}
	return c, env.Err()
}

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := readConfig(getenv)
	if err != nil {
		return err
	}
	logger := cfg.Logger(stdout)

	pool, err := database.Connect(ctx, cfg.DatabaseURL, database.Options{MaxConns: int32(cfg.DBMaxConns), ApplicationName: cfg.Name})
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
		nodes = append(nodes, rdb)
	}

	kafka, err := kafkax.NewClient(cfg.KafkaBrokers, logger, append(consume.ClientOpts(cfg.Group, cfg.Membership,
		kafkax.TopicWebhookPending, kafkax.TopicTransactions), cfg.KafkaSecurity.Opts()...)...)
	if err != nil {
		return err
	}
	defer kafka.Close()

	reg := httpserver.NewRegistry()
	panicked := panics.NewCounter(reg)
	psps, err := pspRegistry(cfg, logger, breaker.NewMetrics(reg))
	if err != nil {
		return err
	}
	locks, err := walletlock.New(cfg.Lock, logger, nodes...)
	if err != nil {
		return err
	}
	alerts, err := alert.New(cfg.Alert, logger, reg, time.Now)
	if err != nil {
		return err
	}
	l := ledger.New(pool)
	proc, err := payout.New(pool, l, psps, locks, cfg.Payout, logger, payout.NewMetrics(reg), alerts, time.Now)
	if err != nil {
		return err
	}
	notifier := outbox.NewNotifier(pool, outbox.NotifyInterval, logger)
	h := handler.New(pool, l, proc, logger, reg, alerts, notifier, time.Now)
	consumer := consume.New(kafka, h, consume.Config{
		Group: cfg.Group, MaxPollRecords: cfg.MaxPollRecords, Concurrency: cfg.Concurrency, Grace: cfg.ShutdownGrace,
		InfraBackoff:         backoff.Policy{Base: 200 * time.Millisecond, Multiplier: 2, Max: 10 * time.Second, MaxAttempts: 1},
		RetryInPlaceAttempts: cfg.RetryAttempts, RetryInPlaceFor: cfg.RetryFor,
		PermanentAsTransient: cfg.PlantPoison, Panics: panicked,
	}, logger, consume.NewMetrics(reg), alerts)
	if cfg.PlantPoison {
		logger.Warn("WORKER_PLANT_POISON_RETRY is set: Postgres refusals are retried in place forever (a planted defect for the chaos suite)")
	}

	router, admin := cfg.Routers(logger, reg,
		httpserver.Check{Name: "postgres", Check: database.Ping(pool)},
		httpserver.Check{Name: "redis", Check: locks.Ping},
		httpserver.Check{Name: "kafka", Check: kafkax.Ping(kafka)},
	)
	logger.Info("payout worker started", "group", cfg.Group, "kafka_security", cfg.KafkaSecurity.String(), "providers", providerNames(psps),
		"redis_nodes", len(nodes), "lock_quorum", locks.Quorum())
	g, gctx := errgroup.WithContext(ctx)
	// A panic in a background loop restarts that loop, not the process.
	g.Go(func() error {
		return panicked.Loop(gctx, logger, "payout-worker/alerts", time.Second, func(ctx context.Context) error { alerts.Run(ctx); return nil })
	})
	g.Go(func() error {
		return panicked.Loop(gctx, logger, "payout-worker/notifier", time.Second, func(ctx context.Context) error { notifier.Run(ctx); return nil })
	})
	g.Go(func() error { return consumer.Run(gctx) })
	g.Go(func() error { return httpserver.Run(gctx, cfg.HTTPAddr, router, logger, cfg.ShutdownGrace) })
	g.Go(func() error { return cfg.ServePprof(gctx, logger) })
	g.Go(func() error { return cfg.ServeAdmin(gctx, admin, logger) })
	err = g.Wait()
	// Leave the group cleanly so partitions move at once, after the last
	// commit (consumer.Run commits before it returns).
	kafka.LeaveGroup()
	logger.Info("payout worker stopped")
	return err
}

func pspRegistry(cfg Config, logger *slog.Logger, m *breaker.Metrics) (psp.Registry, error) {
	httpClient := &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 5 * time.Second,
	}}
	clients := map[string]psp.Client{}
	if cfg.StripeSecretKey != "" {
		clients["stripe"] = psp.NewStripe(cfg.StripeSecretKey, cfg.StripeAPIBase, httpClient)
	} else {
		logger.Warn("STRIPE_SECRET_KEY is not set: Stripe payouts fail and their holds are released")
	}
	if cfg.PaystackKey != "" {
		clients["paystack"] = psp.NewPaystack(cfg.PaystackKey, cfg.PaystackAPIBase, httpClient)
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
		reg[name] = psp.WithBreaker(c, br)
	}
	return reg, nil
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
