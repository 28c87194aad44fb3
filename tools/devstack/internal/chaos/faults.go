package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
	"github.com/aegis-payments/aegis/tools/devstack/internal/stack"
)

// Fault kinds.
const (
	faultKillRelay    = "kill_relay"
	faultKillWorker   = "kill_worker_mid_call"
	faultKillWorkerPS = "kill_worker_psp_hung"
	faultKafkaOutage  = "kafka_outage"
	faultKafkaLeader  = "kafka_leader_errors"
	faultRedisRestart = "redis_restart"
	faultPGKill       = "postgres_connections_killed"
	faultPSP5xx       = "psp_5xx_burst"
	faultPSP429       = "psp_429_burst"
	faultPSPTimeout   = "psp_timeouts"
	faultPSPInvalid   = "psp_invalid_accounts"
	faultPSPDrop      = "psp_webhooks_dropped"
	// faultPSPDropBack: payments, refunds and disputes made at the PSP
	// while it loses their webhooks (reconcile.go).
	faultPSPDropBack = "psp_money_back_webhooks_dropped"
	faultCrashWorker = "crash_loop_worker"
	// faultPSPReversals: the PSP reverses paid Connect transfers, in parts
	// and whole (reversals.go).
	faultPSPReversals = "psp_transfer_reversals"
	faultCrashDLQ     = "crash_loop_dlq_admin"
)

// allFaults is one cycle of faults. A worker killed with PSP calls in flight
// is the fault most likely to expose a bug in the money path, so it comes
// twice per cycle, in both forms: the PSP executed the call and the answer
// was lost (a settlement webhook will follow), or the PSP never executed it
// (only redelivery of the payout's message can finish it; this one waits
// until the PSP is seen holding a call, and comes again later if none came).
func allFaults() []string {
	return []string{faultKillRelay, faultKillWorker, faultKillWorkerPS, faultKafkaOutage, faultKafkaLeader,
		faultRedisRestart, faultPGKill, faultPSP5xx, faultPSP429, faultPSPTimeout, faultPSPInvalid,
		faultCrashWorker, faultCrashDLQ, faultPSPDrop, faultPSPDropBack, faultPSPReversals}
}

// injector breaks the running suite on a seeded schedule.
type injector struct {
	s, redis        *stack.Stack
	pool            *pgxpool.Pool
	dbName          string
	psp, kafkaAdmin string
	rng             *rand.Rand
	profile         Profile
	log             func(format string, args ...any)
	// adminURL reaches the Postgres server as a user that may alter the
	// run's database (faultPostgresAway); sink is the outbound receiver
	// (faultReceiverDown), nil outside the week profile.
	adminURL string
	sink     *sink
	// work is the run's workload, which the OTP fault sends Paystack
	// payouts through (week.go); nil sends none.
	work *workload

	mu       sync.Mutex
	injected map[string]int
	// longestOutage is the longest time Kafka was away, from the start of
	// its stop to the end of its relaunch (the pickup bound, latency.go).
	longestOutage time.Duration
	outages       [][2]time.Time
	// workersDown are the spans no payout-worker ran.
	workersDown [][2]time.Time
	// otpHeld are the Paystack transfers seen waiting for an OTP.
	otpHeld []pspObject
	// missed are the payments whose webhooks the PSP lost (reconcile.go).
	missed missedLog
	// violations are what a fault saw go wrong while it ran (a consumer
	// group that did not settle after a crash loop).
	violations []string
}

// run injects a fault every profile.FaultEvery until ctx ends. Kinds are
// drawn without replacement from a shuffled cycle, so every kind happens in
// a run long enough for one cycle.
func (in *injector) run(ctx context.Context) {
	if in.profile.FaultEvery <= 0 {
		return
	}
	var cycle []string
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(in.profile.FaultEvery):
		}
		if len(cycle) == 0 {
			cycle = allFaults()
			if in.profile.Faults != nil {
				cycle = append([]string(nil), in.profile.Faults...)
			}
			in.rng.Shuffle(len(cycle), func(i, j int) { cycle[i], cycle[j] = cycle[j], cycle[i] })
		}
		kind := cycle[0]
		cycle = cycle[1:]
		err := in.inject(ctx, kind)
		if errors.Is(err, errNoTarget) {
			cycle = append(cycle, kind) // try again later in the cycle
			continue
		}
		if err != nil {
			in.log("fault %s: %v", kind, err)
		}
		in.count(kind)
	}
}

// errNoTarget: a fault found nothing to break (no payout call in flight) and
// did nothing; it is not counted and comes again later.
var errNoTarget = errors.New("nothing to break")

func (in *injector) count(kind string) {
	in.mu.Lock()
	in.injected[kind]++
	in.mu.Unlock()
}

// outage records an outage of the pickup path that began at start and ends
// now: a Kafka outage (stop to relaunch) or a payout-worker crash loop (first
// kill until the group is whole again).
func (in *injector) outage(start time.Time) { in.outageUntil(start, time.Now()) }

// outageUntil records an outage that ends at end, for faults whose effect
// outlasts the fault: a killed worker's partitions wait for its session
// timeout, a killed relay's claimed rows for their lease.
func (in *injector) outageUntil(start, end time.Time) {
	in.mu.Lock()
	in.longestOutage = max(in.longestOutage, end.Sub(start))
	in.outages = append(in.outages, [2]time.Time{start, end})
	in.mu.Unlock()
}

func (in *injector) pick(names ...string) string { return names[in.rng.IntN(len(names))] }

func (in *injector) inject(ctx context.Context, kind string) error {
	in.log("fault: %s", kind)
	if ok, err := in.injectWeek(ctx, kind); ok {
		return err
	}
	switch kind {
	case faultKillRelay:
		name := in.pick("outbox-relay", "outbox-relay-2")
		killed := time.Now()
		if err := in.s.Kill(name); err != nil {
			return err
		}
		sleep(ctx, time.Duration(500+in.rng.IntN(1500))*time.Millisecond)
		// The rows it had claimed wait for their lease to end.
		defer func() { in.outageUntil(killed, time.Now().Add(chaosRelayLease)) }()
		return in.s.Relaunch(name)
	case faultKillWorker:
		// Slow PSP calls make it likely the worker dies between a PSP call
		// and the commit that records it.
		if err := in.pspFaults(`{"latency":"400ms"}`); err != nil {
			return err
		}
		return in.killWorkerDuringCalls(ctx)
	case faultKillWorkerPS:
		// Calls hang at the PSP without being executed (and end in a 504
		// after 3s).
		if err := in.pspFaults(`{"timeout_rate":1,"timeout":"3s"}`); err != nil {
			return err
		}
		return in.killWorkersWithCallsHung(ctx)
	case faultKafkaOutage:
		defer in.outage(time.Now())
		if err := in.s.Terminate("kafka", 10*time.Second); err != nil {
			in.log("kafka stop: %v", err)
		}
		span := in.profile.KafkaOutageMax - in.profile.KafkaOutageMin
		d := in.profile.KafkaOutageMin
		if span > 0 {
			d += time.Duration(in.rng.Int64N(int64(span)))
		}
		sleep(ctx, d)
		return in.s.Relaunch("kafka") // same port, same data directory
	case faultKafkaLeader:
		// A leader election: produce and fetch fail with NOT_LEADER for a
		// few seconds (clients refresh metadata and retry), an outage of
		// the pickup path for as long as it lasts. A window, not a count:
		// failing the next 20 produce requests would, with the clients'
		// growing retry backoff, hold publishing up for 20–45 s, unmeasured.
		window := time.Duration(1000+in.rng.IntN(2000)) * time.Millisecond
		start := time.Now()
		for _, req := range []string{"produce", "fetch"} {
			body := fmt.Sprintf(`{"error":"NOT_LEADER_FOR_PARTITION","request":%q,"for":%q}`, req, window)
			if err := post(in.kafkaAdmin+"/faults", body); err != nil {
				return err
			}
		}
		sleep(ctx, window)
		in.outage(start)
		return nil
	case faultRedisRestart:
		defer in.outage(time.Now()) // no wallet lock can be taken meanwhile
		if err := in.redis.Terminate("redis", 5*time.Second); err != nil {
			in.log("redis stop: %v", err)
		}
		sleep(ctx, time.Duration(300+in.rng.IntN(1000))*time.Millisecond)
		return in.redis.Relaunch("redis")
	case faultPGKill:
		_, err := in.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = $1 AND pid <> pg_backend_pid() AND backend_type = 'client backend'`, in.dbName)
		return err
	case faultPSP5xx:
		return in.pspWindow(ctx, `{"error_rate":0.6,"error_status":503}`)
	case faultPSP429:
		return in.pspWindow(ctx, `{"rate_limit_rate":0.5,"retry_after_seconds":1}`)
	case faultPSPTimeout:
		return in.pspWindow(ctx, `{"timeout_rate":0.3,"timeout_after_create_rate":0.2,"timeout":"3s"}`)
	case faultPSPInvalid:
		return in.pspWindow(ctx, `{"invalid_account_rate":0.3}`)
	case faultPSPDrop:
		// Outcome webhooks lost for good: only the worker's sweeper,
		// looking the payouts up at the PSP, can finish them.
		return in.pspWindow(ctx, `{"drop_webhook_rate":0.5}`)
	case faultPSPDropBack:
		return in.dropMoneyBack(ctx)
	case faultCrashWorker:
		return in.crashLoop(ctx, in.pick("payout-worker", "payout-worker-2"), "payout-worker")
	case faultCrashDLQ:
		return in.crashLoop(ctx, "dlq-admin", "dlq-admin")
	case faultPSPReversals:
		return in.reverseTransfers(ctx)
	}
	return fmt.Errorf("unknown fault %s", kind)
}

// crashLoop SIGKILLs the process name and starts it again, 3 to 5 times
// within a few seconds, and leaves the last one running: a crash-looping pod.
// Each new process is killed as soon as it has joined its consumer group
// (the group is then waiting for the members before it to rejoin or time
// out), so every kill lands mid-rebalance: the pattern that left kfake with
// dead members holding partitions forever (docs/kfake.md).
//
// A crash loop of the payout worker is an outage of the pickup path: from the
// first kill until its group is whole again (waited for even when the fault
// phase ends meanwhile), it counts among the outages the pickup bound allows.
func (in *injector) crashLoop(ctx context.Context, name, group string) error {
	if group == "payout-worker" {
		defer in.outage(time.Now())
	}
	// The group's recovery is waited for even when the run's fault phase
	// ends during the loop: the drain must not start with the group
	// mid-rebalance and the outage unrecorded.
	settle := context.WithoutCancel(ctx)
	kills := 3 + in.rng.IntN(3)
	for i := range kills {
		before, err := in.groupMembers(group)
		if err != nil {
			return err
		}
		if err := in.s.Kill(name); err != nil {
			return err
		}
		if err := in.s.Relaunch(name); err != nil {
			return err
		}
		if i == kills-1 {
			break
		}
		// Wait for the newcomer's JoinGroup (the dead members stay listed
		// until they time out, so the count only grows), then a little more.
		deadline := time.Now().Add(3 * time.Second)
		for ctx.Err() == nil && time.Now().Before(deadline) {
			if n, err := in.groupMembers(group); err == nil && n > before {
				break
			}
			sleep(ctx, 50*time.Millisecond)
		}
		sleep(ctx, time.Duration(in.rng.IntN(400))*time.Millisecond)
	}
	in.log("crash loop: %s killed %d times", name, kills)
	// Apache Kafka's coordinator has the group whole again once the first
	// dead member's session ended (the join round completes) and the
	// members killed in that round timed out too: two session timeouts,
	// plus time for the rebalances. kfake without member expiry keeps the
	// dead ones for the rebalance timeout (minutes) or for ever.
	bound := 2*crashSessionTimeout + 15*time.Second
	want := processesIn(group)
	deadline := time.Now().Add(bound)
	for {
		// The process may die on its own on the way up (Postgres out of
		// connections while the killed ones' are reclaimed); an
		// orchestrator would start it again, and so do we.
		if !in.s.Running(name) {
			in.log("crash loop: %s exited by itself; starting it again", name)
			if err := in.s.Relaunch(name); err != nil {
				return err
			}
		}
		g, err := waitGroupSettled(settle, in.kafkaAdmin, group, want, time.Second)
		if err != nil || g == nil {
			return err
		}
		if time.Now().After(deadline) {
			in.violation("consumer group %s not back to %d member(s) within %s of a crash loop of %s: %s", group, want, bound, name, g)
			return nil
		}
	}
}

// crashSessionTimeout is the services' KAFKA_SESSION_TIMEOUT (its default;
// the chaos suite does not set it).
const crashSessionTimeout = 10 * time.Second

func (in *injector) violation(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	in.log("VIOLATION: %s", msg)
	in.mu.Lock()
	in.violations = append(in.violations, msg)
	in.mu.Unlock()
}

// groupMembers is how many members the broker lists in group.
func (in *injector) groupMembers(group string) (int, error) {
	g, err := groupInfo(in.kafkaAdmin, group)
	if err != nil {
		return 0, err
	}
	return len(g.Members), nil
}

// pspWindow sets PSP faults for a few seconds, then clears them.
func (in *injector) pspWindow(ctx context.Context, spec string) error {
	if err := in.pspFaults(spec); err != nil {
		return err
	}
	sleep(ctx, time.Duration(2000+in.rng.IntN(3000))*time.Millisecond)
	return in.pspFaults("")
}

// killWorkerDuringCalls SIGKILLs a worker once the PSP faults just set have
// had time to catch payout calls in flight, restarts it, and clears them.
func (in *injector) killWorkerDuringCalls(ctx context.Context) error {
	sleep(ctx, time.Duration(500+in.rng.IntN(700))*time.Millisecond)
	name := in.pick("payout-worker", "payout-worker-2")
	killed := time.Now()
	if err := in.s.Kill(name); err != nil {
		return err
	}
	sleep(ctx, time.Second)
	if err := in.s.Relaunch(name); err != nil {
		return err
	}
	// The dead member keeps its partitions until its session times out.
	in.outageUntil(killed, time.Now().Add(crashSessionTimeout))
	return in.pspFaults("")
}

// killWorkersWithCallsHung waits until the PSP holds a payout call without
// executing it, then SIGKILLs both workers, so that whichever made the call
// dies with it outstanding: only redelivery of the payout's message can
// finish that payout (no settlement webhook will come). Waiting for the call,
// rather than killing on a clock, makes the fault land every time there is
// payout traffic; a worker that commits its offsets before the effect then
// leaves a payout stuck. The workers come back after a second and the faults
// are cleared. With no payout call for 10 s it does nothing (errNoTarget).
func (in *injector) killWorkersWithCallsHung(ctx context.Context) error {
	since := time.Now()
	deadline := since.Add(10 * time.Second)
	for {
		hung, err := in.hungCalls(since)
		if err != nil {
			return err
		}
		if hung > 0 {
			in.log("fault %s: %d payout call(s) held at the PSP; killing both workers", faultKillWorkerPS, hung)
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			in.log("fault %s: no payout call reached the PSP in 10s; nothing killed, it comes again later", faultKillWorkerPS)
			if err := in.pspFaults(""); err != nil {
				return err
			}
			return errNoTarget
		}
		sleep(ctx, 100*time.Millisecond)
	}
	workers := []string{"payout-worker", "payout-worker-2"}
	killed := time.Now()
	for _, name := range workers {
		if err := in.s.Kill(name); err != nil {
			return err
		}
	}
	sleep(ctx, time.Second)
	for _, name := range workers {
		if err := in.s.Relaunch(name); err != nil {
			return err
		}
	}
	in.outageUntil(killed, time.Now().Add(crashSessionTimeout))
	return in.pspFaults("")
}

// hungCalls counts the calls the PSP has answered with a hang since t.
func (in *injector) hungCalls(t time.Time) (int, error) {
	resp, err := http.Get(in.psp + "/_psp/calls")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var calls psp.CallsView
	if err := json.NewDecoder(resp.Body).Decode(&calls); err != nil {
		return 0, fmt.Errorf("PSP calls: %w", err)
	}
	n := 0
	for _, c := range calls.Items {
		if c.Outcome == psp.OutcomeFaultTimeout && !c.Time.Before(t) {
			n++
		}
	}
	return n, nil
}

// pspFaults replaces the stand-in's faults; "" clears them.
func (in *injector) pspFaults(spec string) error {
	method := http.MethodPut
	if spec == "" {
		method, spec = http.MethodDelete, ""
	}
	req, _ := http.NewRequest(method, in.psp+"/_psp/faults", bytes.NewReader([]byte(spec)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("PSP faults %s answered %d", spec, resp.StatusCode)
	}
	return nil
}

// clear removes every fault and brings back anything down.
func (in *injector) clear(ctx context.Context) {
	_ = in.pspFaults("")
	req, _ := http.NewRequest(http.MethodDelete, in.kafkaAdmin+"/faults", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	for _, name := range []string{"kafka", "outbox-relay", "outbox-relay-2", "payout-worker", "payout-worker-2", "dlq-admin"} {
		if !in.s.Running(name) {
			if err := in.s.Relaunch(name); err != nil {
				in.log("relaunch %s: %v", name, err)
			}
		}
	}
	if !in.redis.Running("redis") {
		_ = in.redis.Relaunch("redis")
	}
}

func post(url, body string) error {
	resp, err := http.Post(url, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s answered %d", url, resp.StatusCode)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
