package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/aegis-payments/aegis/pkg/alert"
	"github.com/aegis-payments/aegis/pkg/bearer"
	"github.com/aegis-payments/aegis/pkg/config"
	"github.com/aegis-payments/aegis/pkg/database"
	"github.com/aegis-payments/aegis/pkg/httpserver"
	"github.com/aegis-payments/aegis/pkg/kafkax"
	"github.com/aegis-payments/aegis/pkg/lifecycle"
	"github.com/aegis-payments/aegis/pkg/outbox"
	"github.com/aegis-payments/aegis/pkg/panics"
	"github.com/aegis-payments/aegis/pkg/paystackapi"
	"github.com/aegis-payments/aegis/pkg/service"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/api"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/approval"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/approval/person"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/intake"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/replay"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/deadletter/store"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/erasure"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/pspruns"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/integrity/recon"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/jobs"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/otp"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/payouts"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/review/resolution"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/ui"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/watch/depth"
	"github.com/aegis-payments/aegis/services/dlq-admin/internal/watch/stall"
)

// Defaults from docs/design/contract.md ("Environment") and the service's
// own tuning.
const (
	defaultHTTPAddr          = ":8083"
	defaultKafkaBrokers      = "127.0.0.1:9092"
	defaultConsumerGroup     = "dlq-admin"
	defaultReconcileInterval = 24 * time.Hour
	// defaultSecondApproverThreshold: with REQUIRE_SECOND_APPROVER, a bulk
	// replay of more letters than this waits for a second operator.
	defaultSecondApproverThreshold = 100
)

// Config is dlq-admin's settings.
type Config struct {
	service.Base
	KafkaBrokers []string
	// Tokens is DLQ_ADMIN_TOKENS.
	Tokens        *bearer.Set
	ConsumerGroup string
	Membership    kafkax.Membership
	// KafkaSecurity is KAFKA_TLS*, KAFKA_SASL_*.
	KafkaSecurity kafkax.Security
	// Alert is the alerter's (log line and counter; alert.ReadConfig
	// refuses the removed ALERT_WEBHOOK_* settings).
	Alert alert.Config
	// Monitor is DLQ_CHECK_INTERVAL and DLQ_DEPTH_ALERT_THRESHOLD.
	Monitor depth.Config
	// ReplayRate is REPLAY_RATE: bulk replay letters per second.
	ReplayRate float64
	// ReconcileInterval is RECONCILE_INTERVAL.
	ReconcileInterval time.Duration
	// PSPRunTimeout is PSP_RECONCILE_RUN_TIMEOUT: webhook-api works the
	// runs, but this service's River client may lead the shared schema,
	// and River's rescuer, on the leader, judges a run by it.
	PSPRunTimeout time.Duration
	// StoreRetryFor is DLQ_STORE_RETRY_FOR: how long one dead letter is
	// retried in place before it is released and polled again.
	StoreRetryFor time.Duration
	// Stall is STALL_GROUPS, STALL_AFTER and STALL_CHECK_INTERVAL.
	Stall stall.Config
	// PaystackSecretKey and PaystackAPIBase are PAYSTACK_SECRET_KEY and
	// PAYSTACK_API_BASE: Paystack for entering OTPs.
	PaystackSecretKey string
	PaystackAPIBase   string
	// ReconcileStatementTimeout is RECONCILE_STATEMENT_TIMEOUT.
	ReconcileStatementTimeout time.Duration
	// FourEyes is REQUIRE_SECOND_APPROVER, SECOND_APPROVER_THRESHOLD and
	// SECOND_APPROVER_RESOLUTION_AMOUNT.
	FourEyes FourEyes
	// Persons is DLQ_ADMIN_TOKEN_PERSONS: the person holding each token.
	Persons *person.Directory
	// ErasureKey is ERASURE_KEY: the HMAC key of erased users' pseudonyms.
	ErasureKey []byte
	// Outbound is OUTBOUND_ALLOW_HTTP, OUTBOUND_ALLOW_PRIVATE,
	// OUTBOUND_ROTATION_OVERLAP and OUTBOUND_RECOVER_RATE: the management
	// of outbound endpoints.
	Outbound outboundConfig
}

// FourEyes is when an action waits for a second operator.
type FourEyes struct {
	RequireSecondApprover bool
	// Threshold: a bulk replay of more letters than this needs a second
	// operator (with RequireSecondApprover).
	Threshold int
	// ResolutionAmount: a resolution of a payout of more than this (in the
	// currency's minor units) needs a second operator (with
	// RequireSecondApprover); 0, the default, is every resolution.
	ResolutionAmount int64
}

// readConfig reads dlq-admin's settings (with service.ReadBase's,
// kafkax.ReadSecurity's and outbound.ReadPolicy's):
//
//	DLQ_ADMIN_TOKENS                   the operators' tokens, `name:role:token,…` with role `viewer` (reads, personal data redacted) or
//	                                   `operator` (also replays, discards, resolves, approves); a name listed twice with the same role has
//	                                   two valid tokens (rotation). Unset: every request is refused
//	DLQ_ADMIN_TOKEN_PERSONS            `token-name=person,…`: the person holding each `DLQ_ADMIN_TOKENS` token; four-eyes refuses an
//	                                   approval by the requester's person (names compared NFKC, case folded, spaces collapsed); a token not
//	                                   listed is a person of its own name; a name that is no configured token is a configuration error
//	DLQ_CONSUMER_GROUP                 the consumer group that moves `<topic>.dlq` records into the dead-letter store
//	DLQ_CHECK_INTERVAL                 how often the dead-letter depth is measured and new letters are alerted on, and how often
//	                                   replay jobs whose River job is gone are looked for (ended as failed, logged as an error)
//	DLQ_DEPTH_ALERT_THRESHOLD          open dead letters of one topic above which an alert is raised
//	DLQ_STORE_RETRY_FOR                how long one dead letter is retried in place while Postgres cannot store it; then it is
//	                                   released (nothing committed) and polled again. A letter Postgres refuses for its data is stored raw
//	                                   (class `poison`) instead
//	REPLAY_RATE                        dead letters per second a bulk replay job replays (0.1 to 10000)
//	RECONCILE_INTERVAL                 how often the ledger integrity check runs (a River job inserted by every replica at each period's
//	                                   start, UTC multiples of the interval, one per period across replicas; also at start unless the period's
//	                                   ran); `POST /v1/reconciliation` runs one at once
//	RECONCILE_STATEMENT_TIMEOUT        the longest one statement of a ledger integrity check may run
//	OUTBOUND_ROTATION_OVERLAP          after an endpoint's secret is rotated, how long the previous secret keeps signing too
//	OUTBOUND_RECOVER_RATE              deliveries per second "recover since" schedules for an endpoint (1 to 10000)
//	REQUIRE_SECOND_APPROVER            four eyes: an operator's resolution of a NEEDS_REVIEW payout above
//	                                   `SECOND_APPROVER_RESOLUTION_AMOUNT`, and a bulk replay above `SECOND_APPROVER_THRESHOLD`, take
//	                                   effect only when a different person approves (`POST /v1/approvals/{id}/approve`); `true` in the
//	                                   production overlay
//	SECOND_APPROVER_THRESHOLD          with `REQUIRE_SECOND_APPROVER`, a bulk replay of more dead letters than this waits for a second
//	                                   operator
//	SECOND_APPROVER_RESOLUTION_AMOUNT  with `REQUIRE_SECOND_APPROVER`, a resolution of a payout of more than this amount (the currency's
//	                                   minor units) waits for a second person; `0` is every resolution (the production overlay's value)
//	ERASURE_KEY                        the secret (at least 32 bytes) keying the pseudonym that replaces an erased user's id
//	                                   (`aegisctl users erase`): the same user always gets the same pseudonym, which only this key links
//	                                   back to the user id. Keep it as long as the data: a new key gives a returning user a new pseudonym.
//	                                   Unset: erasure requests are refused (503 `erasure_not_configured`)
//	STALL_GROUPS                       the consumer groups watched for stalls; unset: `payout-worker`, `DLQ_CONSUMER_GROUP` and
//	                                   `outbound-events` (outbox-relay's intake of outbound events). An alert
//	                                   (`consumer_stalled:<group>:<topic>:<partition>`, critical) names the member holding a partition that
//	                                   has lag and whose committed offset has not moved for `STALL_AFTER`
//	STALL_AFTER                        how long a partition with lag may go without progress before it is a stall
//	STALL_CHECK_INTERVAL               how often the consumer groups' offsets and lag are read
func readConfig(getenv func(string) string) (Config, error) {
	env := config.New(getenv)
	c := Config{
		Base:          service.ReadBase(env, "dlq-admin", defaultHTTPAddr),
		KafkaBrokers:  env.List("KAFKA_BROKERS"),
		ConsumerGroup: env.String("DLQ_CONSUMER_GROUP", defaultConsumerGroup),
		Membership:    kafkax.ReadMembership(env),
		KafkaSecurity: kafkax.ReadSecurity(env),
		Alert:         alert.ReadConfig(env, "dlq-admin"),
		Monitor: depth.Config{
			CheckInterval:  env.Duration("DLQ_CHECK_INTERVAL", depth.DefaultCheckInterval),
			DepthThreshold: int64(env.Int("DLQ_DEPTH_ALERT_THRESHOLD", depth.DefaultDepthThreshold)),
		},
		ReplayRate:                env.Float("REPLAY_RATE", replay.DefaultRate),
		PaystackSecretKey:         env.String("PAYSTACK_SECRET_KEY", ""),
		PaystackAPIBase:           env.String("PAYSTACK_API_BASE", ""),
		ReconcileInterval:         env.Duration("RECONCILE_INTERVAL", defaultReconcileInterval),
		ReconcileStatementTimeout: env.Duration("RECONCILE_STATEMENT_TIMEOUT", recon.DefaultStatementTimeout),
		PSPRunTimeout:             env.PSPReconcileRunTimeout(),
		StoreRetryFor:             env.Duration("DLQ_STORE_RETRY_FOR", time.Minute),
		FourEyes: FourEyes{
			RequireSecondApprover: env.Bool("REQUIRE_SECOND_APPROVER", false),
			Threshold:             env.Int("SECOND_APPROVER_THRESHOLD", defaultSecondApproverThreshold),
			// 0: with four-eyes on, every resolution waits for a second
			// person unless the operators choose an amount below which one
			// person may resolve alone.
			ResolutionAmount: int64(env.Int("SECOND_APPROVER_RESOLUTION_AMOUNT", 0)),
		},
	}
	c.Outbound = readOutbound(env)
	if key := env.String("ERASURE_KEY", ""); key != "" {
		if len(key) < erasure.MinKeyLength {
			env.Errorf("ERASURE_KEY must be at least %d bytes (a random secret), got %d", erasure.MinKeyLength, len(key))
		}
		c.ErasureKey = []byte(key)
	}
	if c.FourEyes.ResolutionAmount < 0 {
		env.Errorf("SECOND_APPROVER_RESOLUTION_AMOUNT must be 0 or more (minor units), got %d", c.FourEyes.ResolutionAmount)
	}
	if c.FourEyes.Threshold < 0 {
		env.Errorf("SECOND_APPROVER_THRESHOLD must be 0 or more letters, got %d", c.FourEyes.Threshold)
	}
	c.Stall = stall.Config{
		Groups:   env.List("STALL_GROUPS"),
		After:    env.Duration("STALL_AFTER", 2*time.Minute),
		Interval: env.Duration("STALL_CHECK_INTERVAL", 15*time.Second),
	}
	if len(c.Stall.Groups) == 0 {
		c.Stall.Groups = []string{"payout-worker", c.ConsumerGroup, "outbound-events"}
	}
	env.Check(c.Stall.Validate(), map[string]string{
		"Groups":   "STALL_GROUPS",
		"After":    "STALL_AFTER",
		"Interval": "STALL_CHECK_INTERVAL",
	})
	if c.StoreRetryFor <= 0 {
		env.Errorf("DLQ_STORE_RETRY_FOR must be positive")
	}
	if c.Monitor.CheckInterval <= 0 {
		env.Errorf("DLQ_CHECK_INTERVAL must be positive")
	}
	if c.Monitor.DepthThreshold < 1 {
		env.Errorf("DLQ_DEPTH_ALERT_THRESHOLD must be at least 1")
	}
	// Below one letter per 10s a job would mostly wait; above 10000/s the
	// throttle no longer protects anything.
	if c.ReplayRate < 0.1 || c.ReplayRate > 10000 {
		env.Errorf("REPLAY_RATE must be between 0.1 and 10000 letters per second, got %v", c.ReplayRate)
	}
	if c.ReconcileStatementTimeout < time.Second {
		env.Errorf("RECONCILE_STATEMENT_TIMEOUT must be at least 1s")
	}
	if c.ReconcileInterval < time.Second {
		env.Errorf("RECONCILE_INTERVAL must be at least 1s")
	}
	if _, set := env.Lookup("KAFKA_BROKERS"); !set {
		c.KafkaBrokers = []string{defaultKafkaBrokers}
	}
	if len(c.KafkaBrokers) == 0 {
		env.Errorf("KAFKA_BROKERS must list at least one host:port")
	}
	for _, b := range c.KafkaBrokers {
		if _, _, err := net.SplitHostPort(b); err != nil {
			env.Errorf("KAFKA_BROKERS must be comma-separated host:port, got %q", b)
		}
	}
	tokens, err := bearer.Parse(env.String("DLQ_ADMIN_TOKENS", ""), api.Roles())
	if err != nil {
		env.Errorf("DLQ_ADMIN_TOKENS: %v", err)
	}
	c.Tokens = tokens
	if tokens != nil {
		persons, err := person.Parse(env.String("DLQ_ADMIN_TOKEN_PERSONS", ""), tokens.Names())
		if err != nil {
			env.Errorf("DLQ_ADMIN_TOKEN_PERSONS: %v", err)
		}
		c.Persons = persons
	}
	return c, env.Err()
}

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
	tokens := cfg.Tokens
	if tokens.Len() == 0 {
		logger.Warn("DLQ_ADMIN_TOKENS is not set: every /v1 request is refused with 401")
	}

	reg := httpserver.NewRegistry()
	pool, err := database.Connect(ctx, cfg.DatabaseURL, database.Options{MaxConns: 8, ApplicationName: cfg.Name, Registerer: reg})
	if err != nil {
		return err
	}
	defer pool.Close()

	panicked := panics.NewCounter(reg)
	deps := lifecycle.Deps{Logger: logger, Clock: time.Now, Registerer: reg, Panics: panicked}
	alerter, err := alert.New(cfg.Alert, deps)
	if err != nil {
		return fmt.Errorf("alerts: %w", err)
	}
	st := store.New(pool)
	mon, err := depth.New(cfg.Monitor, st, alerter, deps)
	if err != nil {
		return err
	}
	consumer, err := intake.New(intake.Config{Brokers: cfg.KafkaBrokers, Group: cfg.ConsumerGroup,
		Membership: cfg.Membership, Security: cfg.KafkaSecurity, OnStored: mon.Notify, RetryFor: cfg.StoreRetryFor,
	}, pool, deps)
	if err != nil {
		return err
	}
	// Runs after Run, before pool.Close: the consumer has committed and
	// left the group by the time Postgres goes.
	defer consumer.Close()
	notifier := outbox.NewNotifier(pool, outbox.NotifyInterval, logger)
	// Four-eyes: the gate holds what its owners ask it to, and hands an
	// approved request back to the owner of its kind.
	gate := approval.New(pool, cfg.FourEyes.RequireSecondApprover, deps).WithPersons(cfg.Persons)
	replays := replay.New(pool, st, deps).WithNotifier(notifier).WithApproval(gate, cfg.FourEyes.Threshold)
	resolutions := resolution.New(pool, deps).WithNotifier(notifier).WithApproval(gate, cfg.FourEyes.ResolutionAmount)
	erasures := erasure.New(pool, gate, cfg.ErasureKey, deps)
	gate.Register(replay.ApprovalKind, replays.BulkApprovals()).Register(resolution.ApprovalKind, resolutions.Approvals()).
		Register(erasure.ApprovalKind, erasures.Approvals())
	if len(cfg.ErasureKey) == 0 {
		logger.Warn("ERASURE_KEY is not set: personal-data erasure requests are refused")
	}
	reconciler, err := recon.New(pool, alerter, deps)
	if err != nil {
		return err
	}
	reconciler.WithStatementTimeout(cfg.ReconcileStatementTimeout)
	// Bulk replays and the scheduled reconciliation run on River (package
	// jobs); creating a replay job queues its River job in one transaction.
	// Its Kinds are webhook-api's too (pkg/jobs.Kinds): whichever client
	// leads the River schema rescues both services' jobs.
	runner, err := jobs.New(pool, replays, reconciler, jobs.Config{ReplayRate: cfg.ReplayRate,
		ReconcileInterval: cfg.ReconcileInterval, Kinds: jobs.Kinds{PSPRunTimeout: cfg.PSPRunTimeout}}, deps)
	if err != nil {
		return err
	}
	admClient, err := kafkax.NewClient(cfg.KafkaBrokers, logger, append(cfg.KafkaSecurity.Opts(),
		kafkax.Metrics(reg, "admin", logger))...)
	if err != nil {
		return err
	}
	defer admClient.Close()
	stalls, err := stall.New(cfg.Stall, kadm.NewClient(admClient), alerter, deps)
	if err != nil {
		return err
	}

	inbound := append([]lifecycle.Component(nil), lifecycle.Func("dlq-admin/consumer", consumer.Run))

	router, admin := cfg.Routers(logger, reg,
		httpserver.Check{Name: "postgres", Check: database.Ping(pool)},
		httpserver.Check{Name: "kafka", Check: consumer.Ping},
	)
	// A requested PSP reconciliation is a River job that webhook-api works:
	// queued with an insert-only client (this service's runner refuses
	// kinds it has no worker for).
	pspJobs, err := jobs.InsertOnly(pool, logger)
	if err != nil {
		return err
	}
	api.Mount(router, api.Deps{Logger: logger, Store: st, Payouts: payouts.New(pool), Replay: replays, Recon: reconciler, PSPRuns: pspruns.New(pool, pspJobs),
		Resolutions: resolutions, Approvals: gate, Erasures: erasures, Tokens: tokens, Now: time.Now,
		OTP:      &otp.Finalizer{Paystack: paystackClient(cfg), Payouts: payouts.New(pool), Pool: pool, Now: time.Now},
		Outbound: newOutbound(pool, cfg.Outbound)})
	// webhook-api works the PSP reconciliation; dlq-admin alerts on its runs.
	pspWatch := pspruns.NewWatcher(pool, alerter, cfg.Monitor.CheckInterval, deps)
	orphans, err := replay.NewOrphanWatcher(replays, cfg.Monitor.CheckInterval, reg)
	if err != nil {
		return err
	}
	if err := ui.Mount(router); err != nil {
		return err
	}

	// A panic in a background loop restarts that loop, not the process.
	loop := func(name string, fn func(context.Context) error) lifecycle.Component {
		return lifecycle.Supervised("dlq-admin/"+name, deps, fn)
	}
	logger.Info("dlq-admin started", "brokers", cfg.KafkaBrokers, "kafka_security", cfg.KafkaSecurity.String(), "group", cfg.ConsumerGroup, "tokens", tokens.Len(),
		"replay_rate", cfg.ReplayRate, "reconcile_interval", cfg.ReconcileInterval.String())
	return cfg.Run(ctx, logger,
		// Stop taking work: the HTTP server drains in-flight requests, the
		// consumer commits what it stored;
		lifecycle.Stage{Name: "intake", Components: append(cfg.Listeners(router, admin, logger), inbound...)},
		// the background jobs finish their step: a replay job is snoozed
		// between two letters for River to resume on the next client;
		lifecycle.Stage{Name: "jobs", Components: []lifecycle.Component{
			loop("monitor", mon.Run),
			loop("psp-reconciliation-alerts", pspWatch.Run),
			// A replay job whose River job is gone (attempts spent,
			// cancelled, deleted) is ended as failed and alerted on, not
			// left queued or running for ever.
			loop("replay-orphans", orphans.Run),
			loop("stall", stalls.Run),
			runner,
		}},
		// then what they hand work to: relay wake-ups.
		lifecycle.Stage{Name: "flush", Components: []lifecycle.Component{
			loop("notifier", notifier.Run),
		}},
	)
}

// paystackClient is Paystack's client when dlq-admin has its key, else nil.
func paystackClient(cfg Config) *paystackapi.Client {
	if cfg.PaystackSecretKey == "" {
		return nil
	}
	return paystackapi.New(cfg.PaystackSecretKey, cfg.PaystackAPIBase, &http.Client{Timeout: 30 * time.Second})
}
