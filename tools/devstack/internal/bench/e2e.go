package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/partition"
	"github.com/aegis-payments/aegis/pkg/proctest"
	"github.com/aegis-payments/aegis/tools/devstack/internal/stack"
)

// The end-to-end scenario: the whole suite on this box, offered load
// stepped up until it falls behind.
const (
	// e2eUsers wallets receive the credits; payouts draw on them.
	e2eUsers = 1000
	// e2eSenders bounds the requests in flight: enough that the offered
	// rate, not the load tool, decides how many are sent.
	e2eSenders = 64
	// e2eOverloadSenders bounds them in the overload phase: a second of
	// the offered rate's worth, as many PSP deliveries as arrive in the
	// answer bound, so the service's admission control, not the load
	// tool's queue, decides what waits (64 senders made the tool's own
	// queue the latency: 28 s p50 in a run of 2026-11-23).
	e2eOverloadSenders = 1024
	// e2eBound is the latency every step must keep at p99.
	e2eBound = time.Second
	// e2eDrain is how long a step's backlog may take to finish after its
	// load stops before the step is declared behind.
	e2eDrain = 30 * time.Second
	e2eToken = "bench-e2e-token-0123456789"
	// A Stripe connected account and its external account the PSP
	// stand-in pays (no magic prefix): each payout is a transfer, then the
	// account's payout, which stays pending (the measured end).
	e2eDestination     = "acct_e2ebench"
	e2eExternalAccount = "ba_e2ebench"
)

// Offered load steps, as fractions of the bare pgbench rate measured just
// before: the machine's speed (and what else runs on it) moves every
// figure, the ratio much less, and the steps are finest where the goal
// (0.5×) lies. Payouts cost several transactions, a lock and a PSP call
// each, so their steps are a smaller share of it.
var (
	e2eCreditSteps = []float64{0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.5}
	e2ePayoutSteps = []float64{0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.13, 0.16, 0.2, 0.25}
)

// The goals, and how finely each search places its knee, as fractions of
// the bare pgbench: the steps are bisected between the last held and the
// first failed until they are this close.
const (
	e2eCreditGoal, e2eCreditFine = 0.6, 0.05
	e2ePayoutGoal, e2ePayoutFine = 0.1, 0.01
)

// stepRates turns fractions of base into rates rounded to 10/s.
func stepRates(base float64, fractions []float64) []float64 {
	var rates []float64
	for _, f := range fractions {
		r := max(10, math.Round(base*f/10)*10)
		if len(rates) == 0 || r > rates[len(rates)-1] {
			rates = append(rates, r)
		}
	}
	return rates
}

// e2eStep is one step of offered load and what came of it.
type e2eStep struct {
	Offered float64
	Sent    int
	// Acked were answered 2xx; Done of them reached the end (credited, or
	// AWAITING_RESPONSE at the PSP) within the drain time.
	Acked, Done int
	// Rate is Done over the time from the step's start to the last one
	// done: what the suite delivered.
	Rate     float64
	P50, P99 time.Duration
	Usage    []procUsage
	// Failures counts requests not answered 2xx, with the first error.
	Failures int
	FirstErr string
	// Ack is the answer's latency from the scheduled send, p50 and p99;
	// Stages says where the rest of the time went (see stageQueries).
	Ack    [2]time.Duration
	Stages string
	// InTime were answered (any status) within e2eBound of their due
	// time; Shed were answered 503 (overload).
	InTime, Shed int
	// FirstOther is the first failure that was not a 503.
	FirstOther string
}

func (s e2eStep) ok() bool {
	return s.Sent > 0 && s.Failures == 0 && s.Done == s.Acked && s.P99 <= e2eBound
}

// e2eRun is one end-to-end run: the suite, its database and the load tool.
type e2eRun struct {
	r      *Runner
	s      *stack.Stack
	pool   *pgxpool.Pool
	dbName string
	base   string
	client *http.Client
	seq    int
	// credited lists users whose wallets were credited (payouts draw on
	// them).
	credited map[string]bool
	// senders is how many requests may be in flight (0: e2eSenders).
	senders int
}

func (e *e2eRun) sendersOr() int {
	if e.senders > 0 {
		return e.senders
	}
	return e2eSenders
}

// e2eRuns is how many times the e2e scenario finds its sustainable rates,
// each run on a fresh database with its own bare pgbench: the machine is
// shared and noisy, and the spread of the runs' ratios is the noise the
// table states.
const e2eRuns = 3

// e2eMeasure is one e2e run: its bare pgbench before the credits and after
// them, and its credit and payout steps.
type e2eMeasure struct {
	BareBefore, BareAfter float64
	Credits, Payouts      []e2eStep
}

// bare is the run's divisor: the better of its two bare pgbench runs (the
// machine's speed drifts).
func (m e2eMeasure) bare() float64 { return max(m.BareBefore, m.BareAfter) }

// e2e measures the whole suite: signed payment webhooks into webhook-api,
// through the outbox relay and kfake to the payout worker's ledger credit;
// then payout requests through the same path to the PSP stand-in; e2eRuns
// times, the last run followed by the overload.
func (r *Runner) e2e(ctx context.Context) error {
	loadStart := loadAvg()
	var runs []e2eMeasure
	for i := 1; i <= e2eRuns; i++ {
		m, err := r.e2eOnce(ctx, fmt.Sprintf("e2e run %d of %d", i, e2eRuns), i == e2eRuns)
		if err != nil {
			return err
		}
		runs = append(runs, m)
	}
	var bares []string
	for _, m := range runs {
		bares = append(bares, fmt.Sprintf("%.0f / %.0f", m.BareBefore, m.BareAfter))
	}
	r.add(Row{"pgbench bare", fmt.Sprintf("two inserts per tx (1 KiB jsonb each) into two tables with only a primary key, %d clients, before each e2e run and after its credits (the better of each run's two divides its rates)", benchClients),
		fmt.Sprintf("runs (before / after): %s tx/s", strings.Join(bares, "; ")), "—", ""})
	r.add(Row{"e2e", "machine load while e2e ran: 1-minute load average at its start / end (2 cores; above 2, others' work shares the cores)",
		loadStart + " / " + loadAvg(), "—", ""})
	credits := r.e2eRows("credits", "payment webhooks → credited in the ledger", runs, func(m e2eMeasure) []e2eStep { return m.Credits }, e2eCreditGoal)
	payouts := r.e2eRows("payouts", "POST /v1/payouts → AWAITING_RESPONSE at the PSP stand-in", runs, func(m e2eMeasure) []e2eStep { return m.Payouts }, e2ePayoutGoal)
	if r.cfg.PlotPath != "" {
		svg := e2ePlot(runs[credits].Credits, runs[payouts].Payouts, runs[credits].bare())
		if err := os.WriteFile(r.cfg.PlotPath, []byte(svg), 0o644); err != nil {
			return fmt.Errorf("write plot: %w", err)
		}
		r.progress("e2e: plot written to %s", r.cfg.PlotPath)
	}
	return nil
}

// e2eOnce is one e2e run on a fresh database: the bare pgbench, the credit
// steps, the bare pgbench again, the payout steps, and with overload the
// overload after them (its backlog, and the vacuum after it, must not weigh
// on the payout steps).
func (r *Runner) e2eOnce(ctx context.Context, label string, overload bool) (e2eMeasure, error) {
	var m e2eMeasure
	r.progress("%s: bare two-table pgbench baseline, %d clients, %s", label, benchClients, r.cfg.Duration)
	bare, err := r.bareBaseline(ctx, r.cfg.Duration)
	if err != nil {
		return m, fmt.Errorf("bare baseline: %w", err)
	}
	m.BareBefore = bare

	run, stopSuite, err := r.startSuite(ctx, "aegis_bench_e2e", label, nil, nil, 0)
	if err != nil {
		return m, err
	}
	defer stopSuite()

	// Warm up: connections, pools, the consumer group's assignment.
	r.progress("%s: warm-up at 200/s for 3 s", label)
	if _, err := run.creditStep(ctx, 200, 3*time.Second); err != nil {
		return m, fmt.Errorf("warm-up: %w", err)
	}
	if m.Credits, err = run.stepUp(ctx, "credits", stepRates(bare, e2eCreditSteps), e2eCreditFine*bare, run.creditStep); err != nil {
		return m, err
	}
	// Once more after the credits (the suite idles meanwhile): the
	// machine's speed drifts, and the ratio is taken to the better run.
	r.progress("%s: bare two-table pgbench again, %d clients, %s", label, benchClients, r.cfg.Duration)
	if m.BareAfter, err = r.bareBaseline(ctx, r.cfg.Duration); err != nil {
		return m, fmt.Errorf("bare baseline: %w", err)
	}
	if err := run.registerDestinations(ctx); err != nil {
		return m, err
	}
	if m.Payouts, err = run.stepUp(ctx, "payouts", stepRates(bare, e2ePayoutSteps), e2ePayoutFine*bare, run.payoutStep); err != nil {
		return m, err
	}
	if overload {
		if err := run.overload(ctx, m.Credits); err != nil {
			return m, err
		}
	}
	return m, nil
}

// partitionedTable is the table of partition_policies the suite keeps
// (webhook-api's keeper): a scaled suite rescales it.
const partitionedTable = "webhook_events"

// startSuite creates the fresh database dbName and starts the whole suite
// on it as `make dev` does (four services, kfake with the bench's
// partitions, the PSP stand-in never settling), env added to every
// service's settings, and partitionedTable at partitionScale when it is
// above 1 (partition.Rescale); on a server without autovacuum it does autovacuum's
// work meanwhile (standInForAutovacuum). stop ends the suite and closes the
// pool; the database stays (the next run recreates it).
func (r *Runner) startSuite(ctx context.Context, dbName, label string, env map[string]string, serviceEnv map[string]map[string]string,
	partitionScale int) (run *e2eRun, stop func(), err error) {
	url, pool, err := r.freshDB(ctx, dbName)
	if err != nil {
		return nil, nil, err
	}
	if partitionScale > 1 {
		// Before the services start: the keeper runs by the scale it
		// finds at its first run.
		n, err := partition.Rescale(ctx, pool, partitionedTable, partitionScale)
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		r.progress("%s: %s partitioned at time scale %d: %d partitions of %s", label, partitionedTable, partitionScale, n,
			24*time.Hour/time.Duration(partitionScale))
	}
	var ports stack.Ports
	for _, p := range []*int{&ports.WebhookAPI, &ports.OutboxRelay, &ports.PayoutWorker, &ports.DLQAdmin, &ports.Kafka, &ports.PSP} {
		if *p, err = proctest.Port(); err != nil {
			pool.Close()
			return nil, nil, err
		}
	}
	secrets := stack.DevSecrets()
	secrets.StripeWebhookSecret = benchSecret
	secrets.APITokens = "bench:" + e2eToken
	r.progress("%s: starting the suite (four services, kfake, PSP stand-in)", label)
	s, err := stack.Start(ctx, stack.Config{
		BinDir: r.cfg.BinDir, Ports: ports, Secrets: secrets, DatabaseURL: url, RedisURL: r.cfg.RedisURL,
		PSPSettleDelay: "0", // payouts stay AWAITING_RESPONSE: the measured end
		KafkaEnv:       map[string]string{"KAFKA_PARTITIONS": strconv.Itoa(partitions)},
		Env:            env,
		ServiceEnv:     serviceEnv,
	}, r.cfg.Logs)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	stopVacuum, err := standInForAutovacuum(ctx, r, pool, label)
	if err != nil {
		_ = s.Stop(30 * time.Second)
		pool.Close()
		return nil, nil, err
	}
	run = &e2eRun{r: r, s: s, pool: pool, dbName: dbName, base: stack.URL(ports.WebhookAPI), credited: map[string]bool{},
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: e2eSenders, MaxConnsPerHost: e2eSenders}}}
	return run, func() {
		n, err := stopVacuum()
		r.progress("%s: %d vacuums run in autovacuum's stead (first error: %v)", label, n, err)
		_ = s.Stop(30 * time.Second) // a run reports its figures, not the teardown
		pool.Close()
	}, nil
}

// heldStep is the highest step held before the first that did not hold
// (nil: none held).
func heldStep(steps []e2eStep) *e2eStep {
	var best *e2eStep
	for i := range steps {
		if !steps[i].ok() {
			break
		}
		best = &steps[i]
	}
	return best
}

// e2eRows adds the rows of one stepped load over the runs: each run's
// highest rate held as a ratio of its bare pgbench, their median (goal > 0
// is the ratio to reach) and spread, and at the median run's rate its
// latency, where the time goes and what each process used. It returns the
// median run's index.
func (r *Runner) e2eRows(kind, what string, runs []e2eMeasure, steps func(e2eMeasure) []e2eStep, goal float64) int {
	ratios := make([]float64, len(runs))
	var traces, each []string
	for i, m := range runs {
		var all []string
		for _, s := range steps(m) {
			all = append(all, fmt.Sprintf("%.0f→%.0f", s.Offered, s.Rate))
		}
		traces = append(traces, fmt.Sprintf("run %d: %s", i+1, strings.Join(all, ", ")))
		if best := heldStep(steps(m)); best != nil {
			ratios[i] = best.Offered / m.bare()
		}
		each = append(each, fmt.Sprintf("%.2f", ratios[i]))
	}
	order := make([]int, len(runs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(ratios[a], ratios[b]) })
	med := order[len(order)/2]
	target, v := "—", ""
	if goal > 0 {
		target, v = fmt.Sprintf("≥ %.2g× bare pgbench", goal), verdict(ratios[med] >= goal)
	}
	header := fmt.Sprintf("highest offered rate of %s with every acknowledged one done and p99 ≤ 1 s, %d runs (offered→delivered /s per step; %s)",
		what, len(runs), strings.Join(traces, "; "))
	best := heldStep(steps(runs[med]))
	if best == nil {
		r.add(Row{"e2e " + kind, header, fmt.Sprintf("none held in the median run (ratios: %s)", strings.Join(each, ", ")), target, v})
		return med
	}
	result := fmt.Sprintf("median %.2f× bare pgbench (%.0f /s of %.0f); runs: %s×; spread %.2f×",
		ratios[med], best.Offered, runs[med].bare(), strings.Join(each, "×, "), ratios[order[len(order)-1]]-ratios[order[0]])
	if s := steps(runs[med]); best == &s[len(s)-1] {
		result += " (the highest step offered: the suite may hold more)"
	}
	r.add(Row{"e2e " + kind, header, result, target, v})
	r.add(Row{"e2e " + kind, fmt.Sprintf("latency p50 / p99 at %.0f /s, the median run (from the request's scheduled send)", best.Offered),
		ms(best.P50) + " / " + ms(best.P99), "p99 ≤ 1 s", verdict(best.P99 <= e2eBound)})
	r.add(Row{"e2e " + kind, fmt.Sprintf("where the time goes at %.0f /s, p50 / p99: HTTP answer, then each stage after the commit", best.Offered),
		fmt.Sprintf("answer %s / %s, %s", ms(best.Ack[0]), ms(best.Ack[1]), best.Stages), "—", ""})
	r.add(Row{"e2e " + kind, fmt.Sprintf("CPU (cores) and RSS per process at %.0f /s", best.Offered), usageString(best.Usage), "—", ""})
	return med
}

// stepUp offers each rate in turn for the load phase's duration until a
// step falls behind twice in a row (that step is kept: the plot shows the
// knee); then, while the last step held and the one that did not are more
// than fine /s apart, it offers the rate halfway between (bisectRate), so
// the knee is placed within fine. Steps are returned by rate.
func (e *e2eRun) stepUp(ctx context.Context, kind string, rates []float64, fine float64,
	step func(context.Context, float64, time.Duration) (e2eStep, error)) ([]e2eStep, error) {
	var steps []e2eStep
	for _, rate := range rates {
		st, err := e.offer(ctx, kind, rate, step)
		if err != nil {
			return steps, err
		}
		steps = append(steps, st)
		if !st.ok() {
			break
		}
	}
	for {
		// The first step that did not hold, and the held one below it.
		f := slices.IndexFunc(steps, func(s e2eStep) bool { return !s.ok() })
		if f <= 0 {
			return steps, nil
		}
		rate, ok := bisectRate(steps[f-1].Offered, steps[f].Offered, fine)
		if !ok {
			return steps, nil
		}
		e.r.progress("e2e %s: the knee lies between %.0f and %.0f /s: offering %.0f /s", kind, steps[f-1].Offered, steps[f].Offered, rate)
		st, err := e.offer(ctx, kind, rate, step)
		if err != nil {
			return steps, err
		}
		steps = slices.Insert(steps, f, st)
	}
}

// bisectRate is the rate halfway between held and failed, rounded to
// 10/s, when they are more than fine apart and it differs from both.
func bisectRate(held, failed, fine float64) (float64, bool) {
	if fine <= 0 || failed-held <= fine {
		return 0, false
	}
	mid := math.Round((held+failed)/20) * 10
	return mid, mid > held && mid < failed
}

// offer is one step at rate, offered once more if it did not hold (the
// machine is shared and noisy: one spike must not end the run).
func (e *e2eRun) offer(ctx context.Context, kind string, rate float64,
	step func(context.Context, float64, time.Duration) (e2eStep, error)) (e2eStep, error) {
	e.r.progress("e2e %s: offering %.0f /s for %s", kind, rate, e.r.cfg.Duration)
	st, err := step(ctx, rate, e.r.cfg.Duration)
	if err != nil {
		return st, fmt.Errorf("%s at %.0f/s: %w", kind, rate, err)
	}
	if !st.ok() {
		e.r.progress("e2e %s: %.0f /s did not hold (p99 %s, %d of %d done); once more", kind, rate, ms(st.P99), st.Done, st.Acked)
		if st, err = step(ctx, rate, e.r.cfg.Duration); err != nil {
			return st, fmt.Errorf("%s at %.0f/s: %w", kind, rate, err)
		}
	}
	e.r.progress("e2e %s: %.0f /s offered: %d sent, %d acknowledged, %d done, delivered %.0f /s, p50 %s p99 %s; answered p50 %s p99 %s; stages p50 / p99: %s; %s",
		kind, rate, st.Sent, st.Acked, st.Done, st.Rate, ms(st.P50), ms(st.P99), ms(st.Ack[0]), ms(st.Ack[1]), st.Stages, usageString(st.Usage))
	if st.Failures > 0 {
		e.r.progress("e2e %s: %d requests failed, first: %s", kind, st.Failures, st.FirstErr)
	}
	return st, nil
}

// meterFor watches every process of the suite, the Postgres backends of
// its database, the shared Redis server and the load tool itself.
func (e *e2eRun) meterFor(ctx context.Context) (*usageMeter, error) {
	m := &usageMeter{}
	for _, name := range []string{"webhook-api", "outbox-relay", "payout-worker", "dlq-admin", "kafka", "psp"} {
		if p := e.s.Proc(name); p != nil {
			label := name
			if name == "kafka" {
				label = "kfake"
			}
			m.watch(label, false, p.Pid())
		}
	}
	pids, err := backendPids(ctx, e.pool, e.dbName)
	if err != nil {
		return nil, err
	}
	m.watch("postgres", true, pids...)
	m.watch("redis", false, pidsByComm("redis-server")...)
	m.watch("load tool", false, os.Getpid())
	return m, nil
}

// item is one request the open-loop generator sends: its number and the
// time it is due. Latency counts from due, so a request the load tool
// could not send on time (every sender busy) still counts its wait.
type item struct {
	n   int
	due time.Time
}

// openLoop offers n requests at rate per second from now, each handed to
// send by one of senders goroutines at (or, if all are busy, after) its
// due time, and returns when every one was sent.
func openLoop(ctx context.Context, rate float64, n, senders int, send func(item)) {
	ch := make(chan item, n)
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				send(it)
			}
		}()
	}
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	tick := time.NewTicker(2 * time.Millisecond)
	next := 0
	for next < n && ctx.Err() == nil {
		now := time.Now()
		for next < n {
			due := start.Add(time.Duration(next) * interval)
			if due.After(now) {
				break
			}
			ch <- item{n: next, due: due}
			next++
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	tick.Stop()
	close(ch)
	wg.Wait()
}

// outcome is what became of one request.
type outcome struct {
	acked bool
	id    string // the credit's ledger reference or the payout id
	due   time.Time
	ack   time.Duration // answered this long after due
	// status is the HTTP answer's status (0: no answer).
	status int
	err    string
}

// creditStep offers signed payment_intent.succeeded webhooks at rate for
// d and waits for their credits.
func (e *e2eRun) creditStep(ctx context.Context, rate float64, d time.Duration) (e2eStep, error) {
	n := int(rate * d.Seconds())
	created := time.Now().Unix()
	type signed struct {
		body     []byte
		sig, ref string
		user     string
	}
	// Bodies are signed before the clock starts (the load tool shares
	// the cores with what it measures); a PSP signs its own.
	bodies := make([]signed, n)
	for i := range bodies {
		e.seq++
		id := fmt.Sprintf("evt_e2e_%d", e.seq)
		user := fmt.Sprintf("e2e-user-%d", e.seq%e2eUsers)
		b := stripeBody(id, user, created)
		bodies[i] = signed{body: b, sig: sign(b, created), ref: "stripe:pi_" + id, user: user}
	}
	out := make([]outcome, n)
	meter, err := e.meterFor(ctx)
	if err != nil {
		return e2eStep{}, err
	}
	start := time.Now()
	meter.begin()
	openLoop(ctx, rate, n, e.sendersOr(), func(it item) {
		b := bodies[it.n]
		out[it.n] = outcome{id: b.ref, due: it.due}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/webhooks/stripe", bytes.NewReader(b.body))
		req.Header.Set("Stripe-Signature", b.sig)
		req.Header.Set("Content-Type", "application/json")
		status, _, err := e.do(req)
		out[it.n].ack = time.Since(it.due)
		out[it.n].status = status
		switch {
		case err != nil:
			out[it.n].err = err.Error()
		case status != http.StatusOK:
			out[it.n].err = fmt.Sprintf("webhook answered %d", status)
		default:
			out[it.n].acked = true
		}
	})
	usage := meter.end()
	for i, o := range out {
		if o.acked {
			e.credited[bodies[i].user] = true
		}
	}
	done, err := e.collect(ctx, start, out, `SELECT reference, created_at FROM ledger_transactions WHERE kind = 'credit' AND created_at >= $1`)
	if err != nil {
		return e2eStep{}, err
	}
	st := summarize(rate, start, out, done, usage)
	st.Stages, err = e.stages(ctx, creditStages, start)
	return st, err
}

// registerDestinations registers the payout destination of every credited
// wallet (payouts go only to registered destinations).
func (e *e2eRun) registerDestinations(ctx context.Context) error {
	e.r.progress("e2e: registering a payout destination for %d wallets", len(e.credited))
	for user := range e.credited {
		body := fmt.Sprintf(`{"provider":"stripe","destination":%q,"external_account":%q}`, e2eDestination, e2eExternalAccount)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/v1/users/"+user+"/destinations", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e2eToken)
		req.Header.Set("Content-Type", "application/json")
		status, resp, err := e.do(req)
		if err != nil {
			return fmt.Errorf("register destination: %w", err)
		}
		if status/100 != 2 {
			return fmt.Errorf("register destination for %s answered %d: %s", user, status, resp)
		}
	}
	return nil
}

// payoutStep offers payout requests at rate for d on credited wallets and
// waits for each to reach AWAITING_RESPONSE (the PSP stand-in took it;
// it never settles in this run).
func (e *e2eRun) payoutStep(ctx context.Context, rate float64, d time.Duration) (e2eStep, error) {
	n := int(rate * d.Seconds())
	users := make([]string, 0, len(e.credited))
	for u := range e.credited {
		users = append(users, u)
	}
	if len(users) == 0 {
		return e2eStep{}, fmt.Errorf("no credited wallet to pay out from")
	}
	bodies := make([][]byte, n)
	keys := make([]string, n)
	for i := range bodies {
		e.seq++
		keys[i] = fmt.Sprintf("e2e-payout-%d", e.seq)
		bodies[i] = []byte(fmt.Sprintf(`{"user_id":%q,"amount":100,"currency":"usd","destination":%q,"provider":"stripe"}`,
			users[e.seq%len(users)], e2eDestination))
	}
	out := make([]outcome, n)
	meter, err := e.meterFor(ctx)
	if err != nil {
		return e2eStep{}, err
	}
	start := time.Now()
	meter.begin()
	openLoop(ctx, rate, n, e.sendersOr(), func(it item) {
		out[it.n] = outcome{due: it.due}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/v1/payouts", bytes.NewReader(bodies[it.n]))
		req.Header.Set("Authorization", "Bearer "+e2eToken)
		req.Header.Set("Idempotency-Key", keys[it.n])
		req.Header.Set("Content-Type", "application/json")
		status, resp, err := e.do(req)
		out[it.n].ack = time.Since(it.due)
		switch {
		case err != nil:
			out[it.n].err = err.Error()
		case status != http.StatusAccepted:
			out[it.n].err = fmt.Sprintf("payout request answered %d: %s", status, resp)
		default:
			var p struct {
				ID string `json:"payout_id"`
			}
			if err := json.Unmarshal(resp, &p); err != nil || p.ID == "" {
				out[it.n].err = fmt.Sprintf("payout answer without payout_id: %s", resp)
				return
			}
			out[it.n].acked, out[it.n].id = true, p.ID
		}
	})
	usage := meter.end()
	done, err := e.collect(ctx, start, out, `SELECT payout_id::text, min(at) FROM payout_transitions
		WHERE to_status = 'AWAITING_RESPONSE' AND at >= $1 GROUP BY payout_id`)
	if err != nil {
		return e2eStep{}, err
	}
	st := summarize(rate, start, out, done, usage)
	st.Stages, err = e.stages(ctx, payoutStages, start)
	return st, err
}

// A stage of the pipeline: its name and the SQL interval it took per item.
type stage struct{ name, interval string }

// stageQuery joins the rows that time an item's stages (from: FROM and
// WHERE, items since $1).
type stageQuery struct {
	from   string
	stages []stage
}

// creditStages split a credit's time after its webhook was stored: its
// webhook_events row's commit to the credit's commit (relay, kfake and the
// worker; the relay deletes the outbox row it publishes, and the e2e run
// keeps no copy of it, which would add a write per credit to what it
// measures). Rows since $1.
var creditStages = stageQuery{
	from: `webhook_events w JOIN ledger_transactions l ON l.kind = 'credit' AND l.reference = 'stripe:pi_' || w.event_id
		WHERE w.provider = 'stripe' AND w.received_at >= $1`,
	stages: []stage{{"relay+kafka+worker", "l.created_at - w.received_at"}},
}

// payoutStages split a payout's time after its request was stored: the
// relay, the wait in Kafka and the worker's queue until its first
// transaction (SENDING_TO_GATEWAY), and the worker's hold, PSP call and
// record (SENDING_TO_GATEWAY to AWAITING_RESPONSE).
var payoutStages = stageQuery{
	from: `payouts p
		JOIN LATERAL (SELECT min(at) FILTER (WHERE to_status = 'SENDING_TO_GATEWAY') AS sending,
		                     min(at) FILTER (WHERE to_status = 'AWAITING_RESPONSE') AS awaiting
		              FROM payout_transitions t WHERE t.payout_id = p.id) t ON true
		WHERE p.created_at >= $1`,
	stages: []stage{{"relay+queue to worker", "t.sending - p.created_at"}, {"worker: hold+PSP+record", "t.awaiting - t.sending"}},
}

// stages renders p50/p99 of each stage for the items stored since since.
func (e *e2eRun) stages(ctx context.Context, q stageQuery, since time.Time) (string, error) {
	var parts []string
	for _, st := range q.stages {
		var p50, p99 *float64
		err := e.pool.QueryRow(ctx, `SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM `+st.interval+`)),
			percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM `+st.interval+`)) FROM `+q.from, since).Scan(&p50, &p99)
		if err != nil {
			return "", fmt.Errorf("stage %s: %w", st.name, err)
		}
		if p50 == nil || p99 == nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s / %s", st.name, ms(time.Duration(*p50*1e9)), ms(time.Duration(*p99*1e9))))
	}
	return strings.Join(parts, ", "), nil
}

// do sends req and reads the answer to EOF (so the connection is reused).
func (e *e2eRun) do(req *http.Request) (int, []byte, error) {
	resp, err := e.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// collect waits until every acknowledged request of a step is done (query
// lists done ids and their commit time since $1), or until progress stops
// for e2eDrain, and returns the done times by id. The commit time is the
// row's now(): the start of the transaction that wrote it, one round trip
// before its commit (both Postgres and this process read the same clock).
func (e *e2eRun) collect(ctx context.Context, since time.Time, out []outcome, query string) (map[string]time.Time, error) {
	want := map[string]bool{}
	for _, o := range out {
		if o.acked {
			want[o.id] = true
		}
	}
	done := map[string]time.Time{}
	lastProgress := time.Now()
	for {
		rows, err := e.pool.Query(ctx, query, since.Add(-time.Second))
		if err != nil {
			return nil, fmt.Errorf("read what is done: %w", err)
		}
		before := len(done)
		for rows.Next() {
			var id string
			var at time.Time
			if err := rows.Scan(&id, &at); err != nil {
				rows.Close()
				return nil, err
			}
			if want[id] {
				done[id] = at
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if len(done) == len(want) {
			return done, nil
		}
		if len(done) > before {
			lastProgress = time.Now()
		} else if time.Since(lastProgress) > e2eDrain {
			return done, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func summarize(rate float64, start time.Time, out []outcome, done map[string]time.Time, usage []procUsage) e2eStep {
	st := e2eStep{Offered: rate, Sent: len(out), Usage: usage, Done: len(done)}
	var lat, acks []time.Duration
	var last time.Time
	for _, o := range out {
		acks = append(acks, o.ack)
		if o.status != 0 && o.ack <= e2eBound {
			st.InTime++
		}
		if o.status == http.StatusServiceUnavailable {
			st.Shed++
		} else if !o.acked && st.FirstOther == "" {
			st.FirstOther = o.err
		}
		if !o.acked {
			st.Failures++
			if st.FirstErr == "" {
				st.FirstErr = o.err
			}
			continue
		}
		st.Acked++
		at, ok := done[o.id]
		if !ok {
			continue
		}
		lat = append(lat, max(0, at.Sub(o.due)))
		if at.After(last) {
			last = at
		}
	}
	sortDurations(lat)
	sortDurations(acks)
	st.P50, st.P99 = percentile(lat, 0.5), percentile(lat, 0.99)
	st.Ack = [2]time.Duration{percentile(acks, 0.5), percentile(acks, 0.99)}
	if st.Done < st.Acked {
		// Not all done: an undone one counts as over the bound.
		st.P99 = max(st.P99, e2eBound+time.Nanosecond)
	}
	if span := last.Sub(start).Seconds(); st.Done > 0 && span > 0 {
		st.Rate = float64(st.Done) / span
	}
	return st
}

// loadAvg is the machine's 1-minute load average (/proc/loadavg).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// overload is the overload target on the whole suite: overloadFactor times
// the highest credit rate it held (its sustainable rate), open loop, for
// 1.5 phases. Every request must be answered within a second (accepted
// after its commit, the rest 503 with Retry-After); every acknowledged
// payment must still be credited once the backlog drains; then the
// sustainable rate offered again must hold as before (full speed).
func (e *e2eRun) overload(ctx context.Context, credits []e2eStep) error {
	var sustained float64
	for _, s := range credits {
		if !s.ok() {
			break
		}
		sustained = s.Offered
	}
	if sustained == 0 {
		e.r.add(Row{"e2e overload", "3× the sustainable credit rate", "not run: no credit step held", "100% answered within 1 s", "NOT met"})
		return nil
	}
	offered := overloadFactor * sustained
	d := e.r.cfg.Duration * 3 / 2
	e.r.progress("e2e overload: offering %.0f /s (%d× the sustainable %.0f /s) for %s, up to %d in flight", offered, overloadFactor, sustained, d, e2eOverloadSenders)
	client := e.client
	e.senders = e2eOverloadSenders
	e.client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: e2eOverloadSenders, MaxConnsPerHost: e2eOverloadSenders}}
	st, err := e.creditStep(ctx, offered, d)
	e.client.CloseIdleConnections()
	e.client, e.senders = client, 0
	if err != nil {
		return fmt.Errorf("overload at %.0f/s: %w", offered, err)
	}
	e.r.progress("e2e overload: %d sent, %d answered within 1 s, %d acknowledged, %d shed, %d credited; answered p50 %s p99 %s",
		st.Sent, st.InTime, st.Acked, st.Shed, st.Done, ms(st.Ack[0]), ms(st.Ack[1]))
	if err := vacuumIfAutovacuumIsOff(ctx, e.r, e.pool, "e2e overload"); err != nil {
		return err
	}
	e.r.progress("e2e overload: load dropped; %.0f /s again for %s", sustained, e.r.cfg.Duration)
	after, err := e.creditStep(ctx, sustained, e.r.cfg.Duration)
	if err != nil {
		return fmt.Errorf("after the overload at %.0f/s: %w", sustained, err)
	}
	e.r.progress("e2e overload: after it: %d acknowledged, %d done, delivered %.0f /s, p50 %s p99 %s; stages p50 / p99: %s",
		after.Acked, after.Done, after.Rate, ms(after.P50), ms(after.P99), after.Stages)
	secs := d.Seconds()
	others := st.Sent - st.Acked - st.Shed
	e.r.add(Row{"e2e overload", fmt.Sprintf("%d× the sustainable credit rate (%.0f webhooks/s offered to the whole suite, open loop) for %s: answered within 1 s of its due time",
		overloadFactor, offered, d.Round(time.Second)),
		fmt.Sprintf("%.2f%% of %d (answer p50 / p99 %s / %s)", 100*float64(st.InTime)/float64(max(1, st.Sent)), st.Sent, ms(st.Ack[0]), ms(st.Ack[1])),
		"100%", verdict(st.Sent > 0 && st.InTime == st.Sent)})
	e.r.add(Row{"e2e overload", "accepted (200 after commit) and shed (503 with Retry-After) per second; other answers",
		fmt.Sprintf("%.0f /s accepted, %.0f /s shed, %d other%s", float64(st.Acked)/secs, float64(st.Shed)/secs, others, firstOther(st)),
		"no other answers", verdict(others == 0)})
	e.r.add(Row{"e2e overload", "acknowledged payments not credited once the backlog drained",
		fmt.Sprintf("%d of %d", st.Acked-st.Done, st.Acked), "0", verdict(st.Done == st.Acked)})
	e.r.add(Row{"e2e overload", fmt.Sprintf("right after it, %.0f /s again: every acknowledged one credited with p99 ≤ 1 s", sustained),
		fmt.Sprintf("%d of %d credited, p99 %s, delivered %.0f /s", after.Done, after.Acked, ms(after.P99), after.Rate),
		"holds as before (full speed again)", verdict(after.ok())})
	return nil
}

// firstOther names the first failure of a step that was not a 503.
func firstOther(st e2eStep) string {
	if st.FirstOther == "" {
		return ""
	}
	return " (first: " + st.FirstOther + ")"
}
