package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/dlq"
	"github.com/aegis-payments/aegis/pkg/eventproof"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/jobs"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/panics"
	"github.com/aegis-payments/aegis/pkg/partition"
	"github.com/aegis-payments/aegis/pkg/paystackapi"
	"github.com/aegis-payments/aegis/pkg/service"
	"github.com/aegis-payments/aegis/pkg/stripeapi"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/api"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/clients"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/destinations"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/payouts"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/pspsync"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/verify"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/wallets"
)

// Config is webhook-api's settings (docs/reference/configuration.md).
type Config struct {
	service.Base
	StripeWebhookSecrets []string
	PaystackSecretKey    string
	// Clients are API_TOKENS: names, tokens and scopes.
	Clients    *clients.Set
	Limits     payouts.Limits
	DBMaxConns int
	// CommitWorkers transactions commit webhooks concurrently, each holding
	// up to CommitGroup of them (group commit).
	CommitWorkers int
	CommitGroup   int
	// Procs is the GOMAXPROCS webhook-api sets for itself (smallHostProcs),
	// 0 to leave the runtime's.
	Procs int
	// GCPercent is the GC target webhook-api sets for itself
	// (defaultGCPercent), 0 to leave the runtime's.
	GCPercent int
	// ReadingMax bounds the bytes webhook bodies hold while they are read
	// and verified (WEBHOOK_READING_MAX_MIB; api.Reading).
	ReadingMax int64
	// EventProof signs each money event for payout-worker
	// (AEGIS_EVENT_SIGNING_KEY, AEGIS_EVENT_SIGNING_KEY_PREVIOUS).
	EventProof *eventproof.Keys
	// Reconcile is the PSP reconciliation (PSP_RECONCILE_*,
	// STRIPE_SECRET_KEY, STRIPE_API_BASE, PAYSTACK_API_BASE).
	Reconcile ReconcileConfig
}

// ReconcileConfig is the PSP reconciliation's settings.
type ReconcileConfig struct {
	pspsync.Config
	// Interval between scheduled runs; 0: only on demand.
	Interval time.Duration
	// RunTimeout bounds one run (PSP_RECONCILE_RUN_TIMEOUT; River's job
	// timeout and rescue delay, pspsync.RunnerConfig.Kinds.PSPRunTimeout;
	// dlq-admin reads it too: pkg/jobs.Kinds).
	RunTimeout      time.Duration
	StripeSecretKey string
	StripeAPIBase   string
	PaystackAPIBase string
}

// smallHostProcs chooses GOMAXPROCS when the GOMAXPROCS variable is unset
// and the machine has at most two cores (runtime.NumCPU): one. On such a
// host Postgres, usually beside it, needs a core for the commits, and with a second thread every
// goroutine hand-off of a webhook (connection reader, handler, committer,
// pgx) wakes a thread that then waits for the core Postgres is using:
// measured on a 2-core machine, one thread takes 1.2× the webhooks of two
// (docs/reports/benchmarks.md). With more cores the runtime's default stays, a
// container's CPU limit included: on a large node Postgres is elsewhere.
// A GOMAXPROCS set by the operator always wins.
func smallHostProcs(env string, cores int) int {
	if env == "" && cores <= 2 {
		return 1
	}
	return 0
}

// ingestGCPercent is webhook-api's garbage-collection target when the
// GOGC variable is unset: 400 instead of the runtime's 100. The service's
// live heap is small (the line of webhooks waiting for a commit is bounded
// to 250 ms of commits) and each webhook allocates ~10 KiB that dies with
// its request, so at the default the collector ran many times a second and
// took about a tenth of the process's CPU. At 400 the heap may grow to five
// times the live one (tens of MiB) and the collector runs a quarter as
// often: CPU per webhook fell from 161 to 152 µs at 8 clients and from 97
// to 84 µs at 64 (docs/reports/benchmarks.md). A GOGC set by the operator wins.
//
// Five times the live heap is safe because both are bounded: the bodies
// read before verification by WEBHOOK_READING_MAX_MIB (api.Reading), the
// verified ones by the commit line, and the heap as a whole by the soft
// memory limit every service takes from its container (pkg/memlimit), past
// which the collector runs as often as it must whatever GOGC says. GOGC
// then only sets how often it runs while memory is plentiful.
const ingestGCPercent = 400

func defaultGCPercent(env string) int {
	if env == "" {
		return ingestGCPercent
	}
	return 0
}

// readConfig reads webhook-api's settings (with service.ReadBase's,
// eventproof.Read's and the PSP reconciliation schedule's):
//
//	STRIPE_WEBHOOK_SECRET    Stripe's webhook signing secrets, comma-separated (all accepted: rotation, and
//	                         the Connect endpoint's own secret, whose events carry the connected account);
//	                         unset: Stripe webhooks are refused with 503
//	API_TOKENS               the API clients, client(scope):token,… (docs/guides/who-may-move-money.md);
//	                         unset: every /v1 request is refused
//	DB_MAX_CONNS             the service's Postgres connections
//	INGEST_COMMIT_WORKERS    concurrent group commits of webhooks; add one only when groups are full and
//	                         Postgres has cores to spare (below DB_MAX_CONNS)
//	INGEST_COMMIT_GROUP      the most webhooks committed in one transaction, each answered after it
//	WEBHOOK_READING_MAX_MIB  MiB that the webhook bodies being read may hold together before more are shed
//	                         with 503 overloaded (at least 2)
//	GOMAXPROCS               the Go runtime's; unset on a machine of two cores or fewer, webhook-api uses one
//	                         (smallHostProcs: Postgres needs the other core)
//	GOGC                     the Go runtime's; unset, webhook-api uses 400 (ingestGCPercent)
//	PSP_RECONCILE_WINDOW     how far back the first PSP reconciliation run reads
//	PSP_RECONCILE_OVERLAP    how far before its cursor a later run starts reading
//	PSP_RECONCILE_GRACE      how long what may still be in flight (an outcome webhook, a queued posting) is
//	                         not yet a disagreement
//	PSP_RECONCILE_BALANCE_TOLERANCE  the unexplained move, in minor units, of the difference between a PSP's
//	                         balance and its clearing account that is not a disagreement
//	PAYOUT_MAX_AMOUNT        the most one payout may be, per currency in minor units (usd:500000,ngn:50000000);
//	                         unset: no cap
//	PAYOUT_DAILY_MAX         the most one user is paid out over a rolling 24 hours, per currency; unset: no cap
//	DESTINATION_NEW_MAX      what a destination registered less than DESTINATION_COOLING_OFF ago may be paid in
//	                         all, per currency; unset: no cap
//	DESTINATION_COOLING_OFF  how long a new destination is held to DESTINATION_NEW_MAX; 0 turns it off
func readConfig(getenv func(string) string) (Config, error) {
	env := config.New(getenv)
	c := Config{
		Base:                 service.ReadBase(env, "webhook-api", ":8080"),
		StripeWebhookSecrets: env.List("STRIPE_WEBHOOK_SECRET"),
		PaystackSecretKey:    env.String("PAYSTACK_SECRET_KEY", ""),
		DBMaxConns:           env.Int("DB_MAX_CONNS", 16),
		CommitWorkers:        env.Int("INGEST_COMMIT_WORKERS", 1),
		CommitGroup:          env.Int("INGEST_COMMIT_GROUP", 64),
		Procs:                smallHostProcs(getenv("GOMAXPROCS"), runtime.NumCPU()),
		GCPercent:            defaultGCPercent(getenv("GOGC")),
		ReadingMax:           int64(env.Int("WEBHOOK_READING_MAX_MIB", api.DefaultReadingMax>>20)) << 20,
	}
	if c.ReadingMax < 2*api.MaxWebhookBody {
		env.Errorf("WEBHOOK_READING_MAX_MIB must be at least 2 (room for the largest webhook body, 1 MiB, while it is read)")
	}
	c.Reconcile = ReconcileConfig{
		Config: pspsync.Config{
			Window:           env.Duration("PSP_RECONCILE_WINDOW", 24*time.Hour),
			Overlap:          env.Duration("PSP_RECONCILE_OVERLAP", 10*time.Minute),
			Grace:            env.Duration("PSP_RECONCILE_GRACE", 15*time.Minute),
			BalanceTolerance: int64(env.Int("PSP_RECONCILE_BALANCE_TOLERANCE", pspsync.DefaultBalanceTolerance)),
		},
		StripeSecretKey: env.String("STRIPE_SECRET_KEY", ""),
		StripeAPIBase:   env.String("STRIPE_API_BASE", ""),
		PaystackAPIBase: env.String("PAYSTACK_API_BASE", ""),
	}
	// PSP_RECONCILE_INTERVAL with the payout worker's MONEY_BACK_CREDIT_WAIT
	// (when this service is given it too): a refund waits for its payment's
	// credit at least as long as a run needs to recover the payment.
	timing := env.MoneyBackTiming()
	c.Reconcile.Interval, c.Reconcile.RunTimeout = timing.ReconcileInterval, timing.ReconcileRunTimeout
	if c.Reconcile.Window <= 0 {
		env.Errorf("PSP_RECONCILE_WINDOW must be positive")
	}
	if c.Reconcile.Overlap < 0 {
		env.Errorf("PSP_RECONCILE_OVERLAP must not be negative")
	}
	if c.Reconcile.Grace < 0 {
		env.Errorf("PSP_RECONCILE_GRACE must not be negative")
	}
	if c.Reconcile.BalanceTolerance < 0 {
		env.Errorf("PSP_RECONCILE_BALANCE_TOLERANCE must not be negative")
	}
	if c.DBMaxConns < 1 {
		env.Errorf("DB_MAX_CONNS must be at least 1")
	}
	if c.CommitWorkers < 1 || c.CommitWorkers >= c.DBMaxConns {
		env.Errorf("INGEST_COMMIT_WORKERS must be at least 1 and below DB_MAX_CONNS")
	}
	if c.CommitGroup < 1 {
		env.Errorf("INGEST_COMMIT_GROUP must be at least 1")
	}
	set, err := clients.Parse(env.String("API_TOKENS", ""))
	if err != nil {
		env.Errorf("API_TOKENS: %v", err)
	}
	c.Clients = set
	c.EventProof = eventproof.Read(env)
	if c.Limits.PerPayout, err = payouts.ParseLimit(env.String("PAYOUT_MAX_AMOUNT", "")); err != nil {
		env.Errorf("PAYOUT_MAX_AMOUNT: %v", err)
	}
	if c.Limits.Daily, err = payouts.ParseLimit(env.String("PAYOUT_DAILY_MAX", "")); err != nil {
		env.Errorf("PAYOUT_DAILY_MAX: %v", err)
	}
	if c.Limits.NewDestination, err = payouts.ParseLimit(env.String("DESTINATION_NEW_MAX", "")); err != nil {
		env.Errorf("DESTINATION_NEW_MAX: %v", err)
	}
	// A day: long enough for the registration to be noticed (the user's own
	// notice of a new payout account, an operator's review) before more
	// than the cap leaves; 0 turns the cooling-off off.
	if c.Limits.CoolingOff = env.Duration("DESTINATION_COOLING_OFF", 24*time.Hour); c.Limits.CoolingOff < 0 {
		env.Errorf("DESTINATION_COOLING_OFF must not be negative (0 turns the cooling-off off)")
	}
	return c, env.Err()
}

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := readConfig(getenv)
	if err != nil {
		return err
	}
	logger := cfg.Logger(stdout)
	if cfg.Procs > 0 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(cfg.Procs)) // restored for a run inside a test
		logger.Info("GOMAXPROCS chosen for a small host: one thread runs Go code (set GOMAXPROCS to choose)",
			"gomaxprocs", cfg.Procs, "cpus", runtime.NumCPU())
	}
	if cfg.GCPercent > 0 {
		defer debug.SetGCPercent(debug.SetGCPercent(cfg.GCPercent)) // restored for a run inside a test
		logger.Info("GC target chosen: the heap may grow to five times the live one between collections (set GOGC to choose)",
			"gogc", cfg.GCPercent)
	}
	stopTracing, err := cfg.StartTracing(ctx, getenv, logger)
	if err != nil {
		return err
	}
	defer stopTracing() // last: flushes the spans of the shutdown too
	if len(cfg.StripeWebhookSecrets) == 0 {
		logger.Warn("STRIPE_WEBHOOK_SECRET is not set: Stripe webhooks are refused with 503")
	}
	if cfg.PaystackSecretKey == "" {
		logger.Warn("PAYSTACK_SECRET_KEY is not set: Paystack webhooks and payouts are disabled")
	}
	if cfg.Clients.Len() == 0 {
		logger.Warn("API_TOKENS is not set: every /v1 request is refused")
	}
	for _, c := range cfg.Clients.Clients() {
		if c.Scope.Implicit() {
			logger.Warn("API client acts for every user: it is the only client and API_TOKENS states no scope for it",
				"client", c.Name)
			continue
		}
		logger.Info("API client", "client", c.Name, "scope", c.Scope.String())
	}
	if len(cfg.Limits.PerPayout)+len(cfg.Limits.Daily) > 0 {
		logger.Info("payout limits", "per_payout", cfg.Limits.PerPayout, "daily", cfg.Limits.Daily)
	}
	if len(cfg.Limits.NewDestination) > 0 && cfg.Limits.CoolingOff > 0 {
		logger.Info("new destinations cooling off", "max", cfg.Limits.NewDestination, "for", cfg.Limits.CoolingOff.String())
	}

	logger.Info("money events signed for payout-worker", "event_key_id", cfg.EventProof.CurrentKeyID())
	reg := httpserver.NewRegistry()
	pool, err := database.Connect(ctx, cfg.DatabaseURL, database.Options{MaxConns: int32(cfg.DBMaxConns), ApplicationName: cfg.Name,
		Registerer: reg})
	if err != nil {
		return err
	}
	defer pool.Close()

	deps := lifecycle.Deps{Logger: logger, Clock: time.Now, Registerer: reg, Panics: panics.NewCounter(reg)}
	notifier := outbox.NewNotifier(pool, outbox.NotifyInterval, logger)
	letters, err := dlq.NewWriter("webhook-api", deps)
	if err != nil {
		return err
	}
	store := ingest.NewStore(pool, notifier, time.Now).WithLetters(letters).WithProof(cfg.EventProof)
	committer, err := ingest.NewCommitter(store,
		ingest.CommitterConfig{Workers: cfg.CommitWorkers, MaxGroup: cfg.CommitGroup}, deps)
	if err != nil {
		return err
	}
	// webhook_events is kept by daily partition (docs/design/data-lifecycle.md):
	// every replica keeps them; maintain_partitions serialises the replicas.
	keeper, err := partition.New(pool, partition.Config{Tables: []string{partitionedTable}}, deps)
	if err != nil {
		return err
	}
	if err := reg.Register(partition.Gauges(pool, []string{partitionedTable}, logger)); err != nil {
		return fmt.Errorf("register partition gauges: %w", err)
	}
	psps := newPSPClients(cfg)
	reconciler, err := newReconcileWorker(cfg, pool, store, psps, deps)
	if err != nil {
		return err
	}
	router, admin := cfg.Routers(logger, reg, httpserver.Check{Name: "postgres", Check: database.Ping(pool)})
	api.Mount(router, api.Deps{
		Logger:       logger,
		Ingest:       committer,
		Payouts:      payouts.NewStore(pool, notifier, cfg.Limits),
		Destinations: destinations.NewStore(pool),
		Checker:      psps,
		Wallets:      wallets.NewStore(pool),
		Stripe:       verify.NewStripe(cfg.StripeWebhookSecrets),
		Paystack:     verify.NewPaystack(cfg.PaystackSecretKey),
		Clients:      cfg.Clients,
		Webhooks:     api.NewWebhookMetric(reg),
		Refused:      api.NewRefusalLog(logger, reg, time.Minute, time.Now),
		Shed:         api.NewShedLog(logger, reg, time.Minute, time.Now),
		Reading:      api.NewReading(cfg.ReadingMax, reg),
		ProviderEnabled: func(p string) bool {
			return p == ingest.Stripe || (p == ingest.Paystack && cfg.PaystackSecretKey != "")
		},
		Now: time.Now,
	})

	return cfg.Run(ctx, logger,
		// The HTTP server drains its requests, which wait for their commits;
		lifecycle.Stage{Name: "listeners", Components: cfg.Listeners(router, admin, logger)},
		// the committers commit what is still queued;
		lifecycle.Stage{Name: "ingest", Components: append([]lifecycle.Component{committer, keeper.Component(deps)}, reconciler...)},
		// the notifier stops last: the pool closes when run returns.
		lifecycle.Stage{Name: "notifier", Components: []lifecycle.Component{
			lifecycle.Supervised("webhook-api/notifier", deps, notifier.Run)}},
	)
}

// partitionedTable is the table of partition_policies webhook-api keeps:
// its own.
const partitionedTable = "webhook_events"

// newPSPClients is the one client of each PSP with a secret key (nil for
// one without), shared by the destination checks and the reconciliation.
func newPSPClients(cfg Config) destinations.Checker {
	rc := cfg.Reconcile
	client := &http.Client{Timeout: 30 * time.Second}
	var c destinations.Checker
	if rc.StripeSecretKey != "" {
		c.Stripe = stripeapi.New(rc.StripeSecretKey, rc.StripeAPIBase, client)
	}
	if cfg.PaystackSecretKey != "" {
		c.Paystack = paystackapi.New(cfg.PaystackSecretKey, rc.PaystackAPIBase, client)
	}
	return c
}

// newReconcileWorker is the PSP reconciliation for each PSP with a secret
// key: none (and a warning) without any.
func newReconcileWorker(cfg Config, pool *pgxpool.Pool, store *ingest.Store, psps destinations.Checker, deps lifecycle.Deps) ([]lifecycle.Component, error) {
	rc := cfg.Reconcile
	var sources []pspsync.Source
	if psps.Stripe != nil {
		sources = append(sources, pspsync.NewStripe(psps.Stripe))
	}
	if psps.Paystack != nil {
		ps := pspsync.NewPaystack(psps.Paystack)
		ps.ReturnsLookback = rc.Window
		sources = append(sources, ps)
	}
	if len(sources) == 0 {
		deps.Logger.Warn("STRIPE_SECRET_KEY and PAYSTACK_SECRET_KEY are not set: the PSP reconciliation does not run")
		return nil, nil
	}
	runs := pspsync.NewRuns(pool)
	// The runs are River jobs (pkg/jobs): dlq-admin's POST
	// /v1/psp-reconciliation and this service's schedule queue them, this
	// service works them.
	runner, _, err := pspsync.NewRunner(pool, runs, pspsync.NewReconciler(rc.Config, runs, store, sources, deps),
		pspsync.RunnerConfig{Interval: rc.Interval, Kinds: jobs.Kinds{PSPRunTimeout: rc.RunTimeout}}, deps)
	if err != nil {
		return nil, err
	}
	deps.Logger.Info("psp reconciliation", "providers", len(sources), "interval", rc.Interval.String(), "run_timeout", rc.RunTimeout.String(),
		"window", rc.Window.String(), "overlap", rc.Overlap.String(), "grace", rc.Grace.String())
	return []lifecycle.Component{runner}, nil
}
