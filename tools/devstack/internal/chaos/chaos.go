package chaos

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/tools/devstack/internal/alertlog"
	"github.com/aegis-payments/aegis/tools/devstack/internal/published"
	"github.com/aegis-payments/aegis/tools/devstack/internal/stack"
)

// Config says where and how to run.
type Config struct {
	BinDir string
	// AdminURL is a Postgres URL where the user may create databases.
	AdminURL string
	// RedisServer is the redis-server binary the run starts its own Redis
	// with (restarting the machine's Redis would disturb everything else).
	RedisServer string
	Profile     Profile
	Seed        uint64
	// Logs receives every process's output; Progress one line per step.
	Logs, Progress io.Writer
	// Keep leaves the database behind for inspection.
	Keep bool
	// PickupBound fails the run when a payout or a credit waited longer to
	// be picked up; zero means the default (defaultPickupBound,
	// from the longest Kafka outage the run injected).
	PickupBound time.Duration
	// NoOperator skips the operator pass (operator.go): the payouts
	// planted in NEEDS_REVIEW stay there, and invariant 3 must fail.
	NoOperator bool
	// KafkaEnv adds variables for aegis-kafka, for example
	// KAFKA_MEMBER_EXPIRY=off to plant kfake's ghost members.
	KafkaEnv map[string]string
	// WorkerBin, when set, is the payout-worker binary to run instead of
	// BinDir's (a build with -tags chaos, never a production binary), and
	// WorkerEnv adds variables for it (PlantLateFirstAttemptEnv,
	// PlantPoisonRetryEnv).
	WorkerBin string
	WorkerEnv map[string]string
}

// PlantLateFirstAttemptEnv switches a payout-worker built with -tags chaos
// back to saving first_attempt_at only after the PSP call's outcome is
// recorded: the old ordering the week profile must catch as a double
// payment.
const PlantLateFirstAttemptEnv = "AEGIS_PLANT_LATE_FIRST_ATTEMPT"

// PlantPoisonRetryEnv switches a payout-worker built with -tags chaos back
// to retrying Postgres refusals in place for ever: the old behaviour the
// poison check must catch (poison.go).
const PlantPoisonRetryEnv = "AEGIS_PLANT_POISON_RETRY"

// Timings the suite is started with (setUp), which the pickup bound uses.
const (
	chaosSessionTimeout = 10 * time.Second // KAFKA_SESSION_TIMEOUT's default
	chaosPollInterval   = 200 * time.Millisecond
	chaosRelayLease     = 6 * time.Second
)

// suite is one running chaos run.
type suite struct {
	cfg     Config
	s       *stack.Stack
	redis   *stack.Stack
	pool    *pgxpool.Pool
	dbName  string
	ports   stack.Ports
	secrets stack.Secrets
	kafka   string
	// replayStart is when the final replay of open dead letters began.
	replayStart time.Time
	// pickupBound is Config.PickupBound or the default from the faults
	// actually injected.
	pickupBound time.Duration
	// fixedBound: PickupBound was given, and every item is held to it;
	// otherwise each item may also wait out the outages it lived through.
	fixedBound bool
	// outages are the Kafka outages and payout-worker crash loops injected
	// (start, end); started is when
	// the workload began.
	outages [][2]time.Time
	started time.Time
	// sink receives outbound events (week profile).
	sink *sink
	// alerts records the services' structured ALERT log lines from their
	// log stream (pkg/alert: the record of each alert; what pages is a
	// Prometheus rule on the condition's gauge).
	alerts *alertlog.Recorder
	// outboundSettle is how long invariant 18 waits for outbound
	// deliveries to finish (outboundSettleWait); zero: it looks once.
	outboundSettle time.Duration
	// workersDown are the spans no payout-worker ran (the week's worker
	// outage), which deadlines do not count.
	workersDown [][2]time.Time
	// otpHeld are the Paystack transfers the run saw waiting for an OTP.
	otpHeld []pspObject
}

func (su *suite) pspURL() string { return stack.URL(su.ports.PSP) }

func (c Config) log(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "chaos: "+format+"\n", args...)
	}
}

// Run performs one seeded chaos run and reports what it found. An error
// means the run itself could not be carried out; violations are in the
// report.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	start := time.Now()
	if cfg.Logs == nil {
		cfg.Logs = io.Discard
	}
	if cfg.RedisServer == "" {
		cfg.RedisServer = "/usr/bin/redis-server"
	}
	rep := &Report{Seed: cfg.Seed, Profile: cfg.Profile.Name}
	su, err := setUp(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer su.tearDown(ctx)

	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed*7919))
	wl := newWorkload(stack.URL(su.ports.WebhookAPI), su.secrets.StripeWebhookSecret, su.secrets.PaystackSecretKey,
		chaosToken, rng.Uint64(), cfg.Profile.Users)
	in := &injector{s: su.s, redis: su.redis, pool: su.pool, dbName: su.dbName, psp: stack.URL(su.ports.PSP),
		kafkaAdmin: "http://" + su.kafka, rng: rand.New(rand.NewPCG(rng.Uint64(), 1)), profile: cfg.Profile,
		log: cfg.log, injected: map[string]int{}, adminURL: cfg.AdminURL, sink: su.sink, work: wl}
	if cfg.Profile.TimeScale > 1 {
		rep.Week = &WeekFigures{}
	}

	cfg.log("seed %d, profile %s: %s of workload at %d ops/s with a fault every %s", cfg.Seed, cfg.Profile.Name,
		cfg.Profile.Duration, cfg.Profile.Rate, cfg.Profile.FaultEvery)
	rep.Duration, rep.Rate, rep.FaultEvery = cfg.Profile.Duration, cfg.Profile.Rate, cfg.Profile.FaultEvery
	rep.StartFootprint = su.footprint(ctx)
	su.started = time.Now()
	phase, stop := context.WithTimeout(ctx, cfg.Profile.Duration)
	done := make(chan struct{}, 3)
	go func() { in.run(phase); done <- struct{}{} }()
	go func() { wl.sendPoison(phase, min(5*time.Second, cfg.Profile.Duration/4)); done <- struct{}{} }()
	go func() { su.sample(phase, wl, cfg.Profile.SampleEvery, rep); done <- struct{}{} }()
	forgedDone := make(chan struct{})
	go func() {
		defer close(forgedDone)
		if rep.Week == nil {
			return
		}
		// A few forged money events, a third of the way in.
		sleep(phase, cfg.Profile.Duration/3)
		wl.sendForged(phase, fmt.Sprintf("127.0.0.1:%d", su.ports.Kafka), 2)
	}()
	wl.run(phase, cfg.Profile.Rate)
	stop()
	<-done
	<-done
	<-done
	<-forgedDone
	in.clear(ctx)
	for _, v := range in.violations {
		rep.violation("%s", v)
	}

	su.pickupBound, su.fixedBound = cfg.PickupBound, cfg.PickupBound > 0
	if su.pickupBound == 0 {
		in.mu.Lock()
		su.pickupBound = defaultPickupBound(chaosSessionTimeout, chaosPollInterval, in.longestOutage)
		in.mu.Unlock()
	}
	in.mu.Lock()
	su.outages, su.workersDown, su.otpHeld = in.outages, in.workersDown, in.otpHeld
	in.mu.Unlock()
	// Events whose webhooks the PSP lost are recovered from its own record
	// by the PSP reconciliation, requested as an operator would.
	if err := su.reconcilePSP(ctx, in, wl); err != nil {
		rep.violation("psp reconciliation: %v", err)
	}
	cfg.log("faults stopped; draining")
	if err := su.drain(ctx, cfg.Profile.DrainTimeout, waitReplay); err != nil {
		rep.violation("drain: %v", err)
	}
	su.replayStart = time.Now()
	replayed, notReplayable, err := su.replayOpenDeadLetters(ctx)
	if err != nil {
		return nil, err
	}
	rep.Replays, rep.NotReplayable = replayed, notReplayable
	if replayed > 0 {
		cfg.log("replayed %d dead letters; draining again", replayed)
		if err := su.drain(ctx, cfg.Profile.DrainTimeout, waitAll); err != nil {
			rep.violation("drain after replay: %v", err)
		}
	}
	// What machines cannot settle ends NEEDS_REVIEW; an operator settles
	// it from the PSP's record (operator.go).
	op := &OperatorReport{Disabled: cfg.NoOperator}
	rep.Operator = op
	if err := su.plantReviews(ctx, in, wl, reviewPayouts, op); err != nil {
		rep.violation("planting review payouts: %v", err)
	}
	if !cfg.NoOperator {
		if err := su.operate(ctx, op); err != nil {
			rep.violation("operator: %v", err)
		}
	}
	if err := su.drain(ctx, cfg.Profile.DrainTimeout, waitAll); err != nil {
		rep.violation("drain after the operator: %v", err)
	}
	su.checkGroups(ctx, rep)
	rep.DrainedFootprint = su.footprint(ctx)
	cfg.log("checking invariants")
	if err := su.check(ctx, wl, rep); err != nil {
		return nil, err
	}
	rep.Sent = wl.sent
	rep.Faults = in.injected
	rep.Took = time.Since(start)
	return rep, nil
}

func setUp(ctx context.Context, cfg Config) (*suite, error) {
	su := &suite{cfg: cfg, secrets: stack.DevSecrets()}
	su.secrets.APITokens = chaosAPITokens
	su.secrets.DLQAdminTokens = chaosDLQAdminTokens
	su.dbName = fmt.Sprintf("aegis_chaos_%d_%d", cfg.Seed, time.Now().Unix())
	admin, err := pgx.Connect(ctx, cfg.AdminURL)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", cfg.AdminURL, err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+su.dbName); err != nil {
		return nil, err
	}
	u, _ := url.Parse(cfg.AdminURL)
	u.Path = "/" + su.dbName
	dbURL := u.String()
	if _, err := migrations.Up(dbURL); err != nil {
		return nil, err
	}
	if su.pool, err = pgxpool.New(ctx, dbURL); err != nil {
		return nil, err
	}
	if err := published.Keep(ctx, su.pool); err != nil {
		return nil, err
	}

	ports, err := proctest.Ports(9)
	if err != nil {
		return nil, err
	}
	su.ports = stack.Ports{WebhookAPI: ports[0], OutboxRelay: ports[1], PayoutWorker: ports[2], DLQAdmin: ports[3],
		Kafka: ports[4], PSP: ports[5]}
	redisPort, adminPort := ports[6], ports[7]
	su.kafka = fmt.Sprintf("127.0.0.1:%d", adminPort)

	dir, err := os.MkdirTemp("", "aegis-chaos")
	if err != nil {
		return nil, err
	}
	su.alerts = alertlog.NewRecorder(cfg.Logs)
	su.redis = stack.New(stack.Config{}, su.alerts)
	if err := su.redis.LaunchPath("redis", cfg.RedisServer, map[string]string{
		"ARGS": fmt.Sprintf("--port %d --bind 127.0.0.1 --appendonly no --dir %s", redisPort, dir)}); err != nil {
		return nil, err
	}
	if err := waitRedis(ctx, redisPort); err != nil {
		return nil, err
	}
	kafkaEnv := map[string]string{"KAFKA_ADMIN_ADDR": su.kafka}
	for k, v := range cfg.KafkaEnv {
		kafkaEnv[k] = v
	}
	env, pspEnv, err := su.timeEnv()
	if err != nil {
		return nil, err
	}
	var bins map[string]string
	if cfg.WorkerBin != "" {
		bins = map[string]string{"payout-worker": cfg.WorkerBin}
	}
	su.s, err = stack.Start(ctx, stack.Config{
		BinDir: cfg.BinDir, Ports: su.ports, Secrets: su.secrets, DatabaseURL: dbURL,
		RedisURL:     fmt.Sprintf("redis://127.0.0.1:%d/0", redisPort),
		KafkaDataDir: dir + "/kafka", PSPSettleDelay: "1s", RelayReplicas: 2, WorkerReplicas: 2,
		KafkaEnv: kafkaEnv, PSPEnv: pspEnv, Bins: bins, Env: env,
	}, su.alerts)
	if err != nil {
		_ = su.redis.Stop(5 * time.Second) // a fault: killing Redis is the point, not its exit status
		su.sink.close()
		return nil, fmt.Errorf("start the suite: %w", err)
	}
	if su.sink != nil {
		// Outbound events go to the endpoints an operator registers once
		// dlq-admin is up (invariant 18).
		if err := su.registerEndpoints(ctx); err != nil {
			su.tearDown(ctx)
			return nil, err
		}
		su.outboundSettle = outboundSettleWait(cfg.Profile.TimeScale)
	}
	return su, nil
}

// timeEnv is the services' and the stand-in's environment: the chaos
// values, and for a scaled profile every ScaledVars duration at its scale
// and a sink for outbound events (the endpoints' receivers, registered once
// dlq-admin is up: registerEndpoints).
func (su *suite) timeEnv() (env, pspEnv map[string]string, err error) {
	cfg := su.cfg
	env = map[string]string{
		"LOG_LEVEL":             "warn",
		"RELAY_POLL_INTERVAL":   chaosPollInterval.String(),
		"RELAY_LEASE":           chaosRelayLease.String(),
		"RELAY_PUBLISH_TIMEOUT": "2s",
		"RELAY_BACKOFF_BASE":    "300ms",
		"RELAY_BACKOFF_MAX":     "3s",
		"BREAKER_OPEN_FOR":      "3s",
		"PSP_BACKOFF_BASE":      "300ms",
		"PSP_BACKOFF_MAX":       "3s",
		"PSP_CALL_TIMEOUT":      "1s",
		// The stand-in executes a create at once or never (its
		// slow_create is not in the chaos mix): 3s covers it.
		"PSP_SETTLE_WINDOW": "3s",
		// Payouts whose outcome webhook was dropped are looked up.
		"PAYOUT_CHECK_AFTER":    "10s",
		"PAYOUT_SWEEP_INTERVAL": "2s",
		"WALLET_LOCK_EXPIRY":    "4s",
		"SHUTDOWN_GRACE":        "10s",
		"KAFKA_SESSION_TIMEOUT": chaosSessionTimeout.String(),
	}
	for k, v := range cfg.WorkerEnv {
		env[k] = v // every service gets it; only payout-worker reads it
	}
	scale := cfg.Profile.TimeScale
	if scale <= 1 {
		return env, nil, nil
	}
	for k, v := range ScaledEnv(scale, ReadAll, ReadWorker, ReadRelay, ReadWebhook, ReadDLQAdmin) {
		env[k] = v
	}
	if su.sink, err = startSink(); err != nil {
		return nil, nil, err
	}
	return env, ScaledEnv(scale, ReadPSP), nil
}

func (su *suite) tearDown(ctx context.Context) {
	if su.s != nil {
		if err := su.s.Stop(30 * time.Second); err != nil {
			su.cfg.log("stop: %v", err)
		}
	}
	if su.redis != nil {
		_ = su.redis.Stop(5 * time.Second) // a fault: killing Redis is the point, not its exit status
	}
	su.sink.close()
	su.pool.Close()
	if su.cfg.Keep {
		su.cfg.log("database kept: %s", su.dbName)
		return
	}
	if admin, err := pgx.Connect(ctx, su.cfg.AdminURL); err == nil {
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+su.dbName+" WITH (FORCE)")
		admin.Close(ctx)
	}
}

// drainWait says what a drain waits for.
type drainWait int

const (
	// waitAll: every outbox row published.
	waitAll drainWait = iota
	// waitReplay: the drain before the replay of open dead letters leaves
	// out the refunds and disputes waiting for their payment's credit
	// (partition key credit-wait:…): the credit may itself be in a dead
	// letter (its publish failed through a Kafka outage) that only the
	// replay sends; the drains after it wait for them.
	waitReplay
)

// drainScheduledMax bounds how much longer than its timeout a drain waits
// for outbox rows scheduled on purpose for later: past
// MONEY_BACK_CREDIT_WAIT/10 at the defaults (46m/10, 4.6 min), the longest
// a refund that overtook its payment's credit waits between two looks.
const drainScheduledMax = 5 * time.Minute

// drain waits until nothing is in flight: no unpublished outbox row, no
// payout between states (except those parked behind an open dead letter),
// every dead letter stored — three checks in a row. A row a service
// scheduled for later (next_retry_at ahead: a retry's backoff, a refund
// waiting for its payment's credit) is waited for until it is due and a
// poll after, up to drainScheduledMax past the timeout; a row already due
// that stays unpublished is stuck, and fails the drain at the timeout.
func (su *suite) drain(ctx context.Context, timeout time.Duration, w drainWait) error {
	start := time.Now()
	deadline := start.Add(timeout)
	stable := 0
	var last string
	for time.Now().Before(deadline) {
		var unfinished, moving, dlqRows, stored int
		var scheduled *time.Time
		err := su.pool.QueryRow(ctx, `SELECT
			(SELECT max(next_retry_at) FROM transaction_outbox WHERE finished_at IS NULL AND next_retry_at > now()
			   AND NOT ($1 AND partition_key LIKE 'credit-wait:%')),
			(SELECT count(*) FROM transaction_outbox WHERE finished_at IS NULL AND NOT ($1 AND partition_key LIKE 'credit-wait:%')),
			-- A payout whose command or PSP outcome is in an open dead letter
			-- waits for an operator (the replay below), not for the system.
			(SELECT count(*) FROM payouts p WHERE p.status NOT IN ('SUCCEEDED', 'FINALIZED', 'NEEDS_REVIEW')
			   AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.status = 'open'
			                   AND position(convert_to(p.id::text, 'UTF8') in d.payload) > 0)),
			(SELECT count(DISTINCT (headers->>'original_topic', headers->>'original_partition', headers->>'original_offset'))
			   FROM `+published.Rows+` o WHERE topic LIKE '%.dlq'),
			(SELECT count(*) FROM dead_letters WHERE source = 'consumer')`, w == waitReplay).Scan(&scheduled, &unfinished, &moving, &dlqRows, &stored)
		if err != nil {
			return err
		}
		if scheduled != nil {
			until := scheduled.Add(10 * time.Second)
			if limit := start.Add(timeout + drainScheduledMax); until.After(limit) {
				until = limit
			}
			if until.After(deadline) {
				deadline = until
			}
		}
		last = fmt.Sprintf("%d outbox rows unpublished, %d payouts in flight, %d of %d dead letters stored", unfinished, moving, stored, dlqRows)
		if unfinished == 0 && moving == 0 && stored >= dlqRows {
			stable++
			if stable == 3 {
				return nil
			}
		} else {
			stable = 0
		}
		sleep(ctx, time.Second)
	}
	return fmt.Errorf("not drained after %s: %s%s", timeout, last, su.stuckRows(ctx))
}

// stuckRows names up to ten unfinished outbox rows, for a drain that timed
// out: which topic, in which state, claimed by whom until when, retried
// how often and when next.
func (su *suite) stuckRows(ctx context.Context) string {
	rows, err := su.pool.Query(ctx, `SELECT format('%s %s %s retries=%s next=%s locked_by=%s until=%s created=%s',
			id, topic, status, retry_count, coalesce(next_retry_at::text, '-'), coalesce(locked_by, '-'),
			coalesce(locked_until::text, '-'), created_at)
		FROM transaction_outbox WHERE finished_at IS NULL ORDER BY id LIMIT 10`)
	if err != nil {
		return "; unfinished rows unreadable: " + err.Error()
	}
	stuck, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(stuck) == 0 {
		return ""
	}
	return "; unfinished: " + strings.Join(stuck, "; ")
}

// replayOpenDeadLetters replays, through dlq-admin's API as an operator
// would, every open dead letter but those of payouts whose connected payout
// failed (a replay would pay out again to the external account that failed;
// the operator reverses their transfer instead, connect.go), and counts
// those it refuses as not replayable.
func (su *suite) replayOpenDeadLetters(ctx context.Context) (replayed, notReplayable int, err error) {
	rows, err := su.pool.Query(ctx, `SELECT id FROM dead_letters WHERE status = 'open' AND error_class <> $1 ORDER BY id`,
		classConnectedPayoutFailed)
	if err != nil {
		return 0, 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, 0, err
	}
	for _, id := range ids {
		ok, err := su.replayOne(ctx, id)
		if err != nil {
			return replayed, notReplayable, err
		}
		if ok {
			replayed++
		} else {
			notReplayable++
		}
	}
	return replayed, notReplayable, nil
}

// replayOne replays one letter as an operator (or aegisctl's user) would: a
// 503 says Postgres did not answer and is safe to retry, so it is retried;
// a 409 after such a retry means the first attempt committed after all.
func (su *suite) replayOne(ctx context.Context, id int64) (replayed bool, err error) {
	retried := false
	for attempt := 1; ; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost,
			fmt.Sprintf("%s/v1/dead-letters/%d/replay", stack.URL(su.ports.DLQAdmin), id),
			strings.NewReader(`{"reason":"chaos: replay after the faults stopped"}`))
		req.Header.Set("Authorization", "Bearer "+opsToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusAccepted:
			return true, nil
		case resp.StatusCode == http.StatusUnprocessableEntity:
			return false, nil
		case resp.StatusCode == http.StatusConflict && retried:
			var status string
			if err := su.pool.QueryRow(ctx, `SELECT status FROM dead_letters WHERE id = $1`, id).Scan(&status); err != nil {
				return false, err
			}
			if status == "replayed" {
				return true, nil
			}
		case resp.StatusCode == http.StatusServiceUnavailable && attempt < 10:
			retried = true
			sleep(ctx, 500*time.Millisecond)
			continue
		}
		return false, fmt.Errorf("replay of dead letter %d answered %d (attempt %d)", id, resp.StatusCode, attempt)
	}
}

func waitRedis(ctx context.Context, port int) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err == nil {
			_, _ = conn.Write([]byte("PING\r\n"))
			line, _ := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			if strings.HasPrefix(line, "+PONG") {
				return nil
			}
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return fmt.Errorf("redis on port %d did not start", port)
}
