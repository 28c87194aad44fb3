// Command aegis-dev is `make dev`: it prepares the local database, then runs
// the Kafka stand-in, the PSP stand-in and the four services in the
// foreground with one log stream, until Ctrl-C stops them all in order.
//
// Postgres and Redis must already run on localhost (`make dev` runs
// scripts/devdeps.sh first, which starts or installs them). Every setting has
// a local default; DATABASE_URL, REDIS_URL and the secrets of docs/design/contract.md
// override them, BIN_DIR points at the binaries (default bin).
//
// DATABASE_URL is the schema owner's: aegis-dev migrates with it. Each
// service connects as its own role (migrations.ServiceRoles): by default the
// same URL with the role as user and no password (trust auth on localhost),
// which aegis-dev makes a login role; DATABASE_URL_WEBHOOK_API,
// DATABASE_URL_OUTBOX_RELAY, DATABASE_URL_PAYOUT_WORKER and
// DATABASE_URL_DLQ_ADMIN override a service's URL (deploy/k8s's secret keys).
package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/buildinfo"
	"github.com/aegis-payments/aegis/tools/devstack/internal/stack"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Println(buildinfo.Get().String("aegis-dev"))
		return
	}
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("service", "aegis-dev")
	if err := run(logger); err != nil {
		logger.Error("make dev failed", "error", err.Error())
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := strings.TrimSpace(os.Getenv(name)); v != "" {
		return v
	}
	return def
}

// otelEnv is the OTEL_* variables of this process, handed to every service.
func otelEnv() map[string]string {
	m := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "OTEL_") {
			m[k] = v
		}
	}
	return m
}

func run(logger *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()

	secrets := stack.DevSecrets()
	secrets.StripeWebhookSecret = env("STRIPE_WEBHOOK_SECRET", secrets.StripeWebhookSecret)
	secrets.StripeSecretKey = env("STRIPE_SECRET_KEY", secrets.StripeSecretKey)
	secrets.PaystackSecretKey = env("PAYSTACK_SECRET_KEY", secrets.PaystackSecretKey)
	secrets.APITokens = env("API_TOKENS", secrets.APITokens)
	secrets.EventSigningKey = env("AEGIS_EVENT_SIGNING_KEY", secrets.EventSigningKey)
	secrets.DLQAdminTokens = env("DLQ_ADMIN_TOKENS", secrets.DLQAdminTokens)
	secrets.ErasureKey = env("ERASURE_KEY", secrets.ErasureKey)
	cfg := stack.Config{
		BinDir:      env("BIN_DIR", "bin"),
		Ports:       stack.DevPorts(),
		Secrets:     secrets,
		DatabaseURL: env("DATABASE_URL", "postgres://localhost:5432/aegis?sslmode=disable"),
		// Each service's own role (see the package doc).
		ServiceDatabaseURLs: serviceDatabaseURLs(),
		RedisURL:            env("REDIS_URL", "redis://127.0.0.1:6379/0"),
		KafkaDataDir:        env("KAFKA_DATA_DIR", ""),
		PSPSettleDelay:      env("PSP_SETTLE_DELAY", "2s"),
		// off shows kfake's ghost group members (docs/kfake.md).
		KafkaEnv: map[string]string{"KAFKA_MEMBER_EXPIRY": env("KAFKA_MEMBER_EXPIRY", "")},
		// Tracing: OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 make dev
		// sends every service's spans to Jaeger (docs/guides/follow-a-payment.md).
		Env: otelEnv(),
	}

	// Four eyes: REQUIRE_SECOND_APPROVER=true make dev (the second operator
	// token is in DevSecrets).
	for _, k := range []string{"REQUIRE_SECOND_APPROVER", "SECOND_APPROVER_THRESHOLD"} {
		if v := os.Getenv(k); v != "" {
			cfg.Env[k] = v
		}
	}

	if err := ensureDatabase(ctx, cfg.DatabaseURL); err != nil {
		return err
	}
	v, err := migrations.Up(cfg.DatabaseURL)
	if err != nil {
		return err
	}
	logger.Info("database ready", "schema_version", v)
	if err := pingRedis(ctx, cfg.RedisURL); err != nil {
		return err
	}

	s, err := stack.Start(ctx, cfg, os.Stdout)
	if err != nil {
		return err
	}
	banner(cfg, time.Since(start))

	select {
	case <-ctx.Done():
		logger.Info("stopping the suite")
	case p := <-s.Exited():
		logger.Error("a process stopped unexpectedly; stopping the suite", "process", p.Name, "error", fmt.Sprint(p.Err()))
		err = fmt.Errorf("%s exited: %w", p.Name, cmp.Or(p.Err(), errors.New("exit status 0")))
	}
	if stopErr := s.Stop(30 * time.Second); stopErr != nil && err == nil {
		err = stopErr
	}
	logger.Info("suite stopped")
	return err
}

// serviceDatabaseURLs reads DATABASE_URL_<SERVICE> for each service that
// has one set.
func serviceDatabaseURLs() map[string]string {
	m := map[string]string{}
	for svc := range migrations.ServiceRoles() {
		if v := env("DATABASE_URL_"+strings.ToUpper(strings.ReplaceAll(svc, "-", "_")), ""); v != "" {
			m[svc] = v
		}
	}
	return m
}

// ensureDatabase creates the database named in databaseURL if it is missing.
func ensureDatabase(ctx context.Context, databaseURL string) error {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return fmt.Errorf("DATABASE_URL: %w", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" {
		return errors.New("DATABASE_URL names no database")
	}
	admin := *u
	admin.Path = "/postgres"
	conn, err := pgx.Connect(ctx, admin.String())
	if err != nil {
		return fmt.Errorf("connect to Postgres at %s (is it running? scripts/devdeps.sh starts it): %w", u.Host, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", name, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// pingRedis checks that Redis answers PING, without a client library.
func pingRedis(ctx context.Context, redisURL string) error {
	u, err := url.Parse(redisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	d := net.Dialer{Timeout: 3 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return fmt.Errorf("no Redis answers at %s (scripts/devdeps.sh starts it): %w", u.Host, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return fmt.Errorf("ping Redis: %w", err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read Redis's answer to PING at %s: %w", u.Host, err)
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("the Redis at %s answered %q to PING", u.Host, strings.TrimSpace(line))
	}
	return nil
}

func banner(cfg stack.Config, took time.Duration) {
	p := cfg.Ports
	apiToken := cfg.Secrets.APITokens[strings.Index(cfg.Secrets.APITokens, ":")+1:]
	if i := strings.Index(apiToken, ","); i >= 0 {
		apiToken = apiToken[:i]
	}
	fmt.Printf(`
  Aegis is running (ready in %.1fs). Ctrl-C stops everything.

    webhook-api    %s   (POST /webhooks/stripe, /webhooks/paystack, /v1/users/{id}/destinations, /v1/payouts)
    outbox-relay   %s
    payout-worker  %s
    dlq-admin      %s   (GET /v1/dead-letters; POST /v1/outbound/endpoints: http and loopback receivers allowed)
    kafka (kfake)  127.0.0.1:%d
    PSP stand-in   %s   (GET /_psp/objects, /_psp/calls)

    STRIPE_WEBHOOK_SECRET=%s
    API token:     %s
    DLQ tokens:    %s

  Send a first webhook and payout: see README.md, "Your first payment".

`, took.Seconds(), stack.URL(p.WebhookAPI), stack.URL(p.OutboxRelay), stack.URL(p.PayoutWorker), stack.URL(p.DLQAdmin),
		p.Kafka, stack.URL(p.PSP), cfg.Secrets.StripeWebhookSecret, apiToken, cfg.Secrets.DLQAdminTokens)
}
