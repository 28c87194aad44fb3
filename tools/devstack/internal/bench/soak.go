package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The soak (`make soak`): the whole suite, as the e2e scenario starts it,
// under a steady open-loop load of signed payment webhooks at a share of
// its sustainable credit rate for a long time, with the services'
// retention scaled down so that it is active, to see whether performance
// lasts: per window throughput and latency, the tables' sizes and vacuums,
// the hot statements' plans, CPU per process.

// soakDB is the soak's database (apart from the bench's: the two never
// share one, and the command holds the bench's lock anyway).
const soakDB = "aegis_soak"

// soakRefPrefix starts the ledger reference of every soak webhook's
// credit; the number after it is the webhook's index.
const soakRefPrefix = "stripe:pi_evt_soak_"

// SoakConfig says how to soak.
type SoakConfig struct {
	// Duration of the steady load.
	Duration time.Duration
	// Rate, if set, is the offered rate (webhooks/s); otherwise a step
	// search finds the sustainable rate and the soak offers Share of it.
	Rate  float64
	Share float64
	// StepDuration is each step's length in the search (SoakStep when
	// zero).
	StepDuration time.Duration
	// Window is the reporting window (0: windowFor(Duration)).
	Window time.Duration
	// Sample is how often sizes, vacuum counters and plans are read.
	Sample time.Duration
	// TimeScale divides the retention settings (soakRetention); 1 or
	// less: the defaults.
	TimeScale float64
	// Keep keeps the soak's database afterwards.
	Keep bool
	// ProfileDir, when set, receives each service's CPU profile of the
	// first and the last window (SoakProfile).
	ProfileDir string
}

// SoakResult is what a soak measured.
type SoakResult struct {
	Config SoakConfig
	// Window is the window used; Scaled when it is not soakWindowLen.
	Window       time.Duration
	WindowScaled bool
	// Bare is the bare pgbench rate the step search was built from, Steps
	// the search (both empty with a given rate), Sustainable its highest
	// step held, Rate what the soak offered.
	Bare        float64
	Steps       []e2eStep
	Sustainable float64
	Rate        float64
	Retention   []retentionSetting
	// Autovacuum: the server runs autovacuum (else the soak's stand-in
	// vacuums as autovacuum would: the vacuum counts, not autovacuum's).
	Autovacuum bool
	Sent       int
	// Drain is how long the backlog took to be credited after the load.
	Drain     time.Duration
	Windows   []soakWindow
	OK        bool
	Why       string
	Samples   []tableSample
	Plans     []planHistory
	Profiles  []SoakProfile
	LoadStart string
	LoadEnd   string
	// Date is when the soak ended.
	Date time.Time
}

// SoakStep is how long each step of the soak's search is held: longer
// than the bench's, since the rate is to be kept for an hour, and a rate
// held for ten seconds (the smoke run of 2026-11-29: 3,440 /s) fell behind
// within a minute at 70 % of it.
const SoakStep = 30 * time.Second

// Soak runs the soak.
func (r *Runner) Soak(ctx context.Context, sc SoakConfig) (*SoakResult, error) {
	if sc.Duration <= 0 {
		return nil, errors.New("soak: no duration")
	}
	if sc.Share <= 0 {
		sc.Share = 0.7
	}
	if sc.StepDuration <= 0 {
		sc.StepDuration = SoakStep
	}
	if sc.Sample <= 0 {
		sc.Sample = time.Minute
	}
	res := &SoakResult{Config: sc, Window: sc.Window, LoadStart: loadAvg()}
	if res.Window <= 0 {
		res.Window = windowFor(sc.Duration)
	}
	res.WindowScaled = res.Window != soakWindowLen
	settings, err := soakRetentionSettings(sc.TimeScale)
	if err != nil {
		return nil, err
	}
	res.Retention = settings
	repo, err := repoRoot()
	if err != nil {
		return nil, err
	}

	if !sc.Keep {
		defer r.dropDB(soakDB)
	}
	var prof *profiler
	var serviceEnv map[string]map[string]string
	if sc.ProfileDir != "" {
		if prof, serviceEnv, err = newProfiler(sc.ProfileDir); err != nil {
			return nil, err
		}
	}
	run, stop, err := r.startSuite(ctx, soakDB, "soak", retentionEnv(settings, sc.TimeScale), serviceEnv, int(sc.TimeScale))
	if err != nil {
		return nil, err
	}
	defer stop()
	off, err := autovacuumOff(ctx, run.pool)
	if err != nil {
		return nil, err
	}
	res.Autovacuum = !off

	r.progress("soak: warm-up at 200/s for 3 s")
	if _, err := run.creditStep(ctx, 200, 3*time.Second); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	res.Rate = sc.Rate
	if res.Rate <= 0 {
		if err := run.soakSearch(ctx, sc, res); err != nil {
			return res, err
		}
	}

	plans := newPlanWatch(repo, run.pool)
	if err := run.soakLoad(ctx, res, plans, prof); err != nil {
		return res, err
	}
	res.Plans = plans.history
	res.OK, res.Why = soakVerdict(res.Windows)
	res.LoadEnd = loadAvg()
	res.Date = time.Now().UTC()
	return res, nil
}

// soakSearch finds the sustainable credit rate as the e2e scenario does
// (its steps, fractions of a bare pgbench run just before, each held for
// StepDuration, a failed step tried once more) and sets the soak's rate
// to Share of it.
func (e *e2eRun) soakSearch(ctx context.Context, sc SoakConfig, res *SoakResult) error {
	r := e.r
	r.progress("soak: bare two-table pgbench baseline, %d clients, %s", benchClients, sc.StepDuration)
	bare, err := r.bareBaseline(ctx, sc.StepDuration)
	if err != nil {
		return fmt.Errorf("bare baseline: %w", err)
	}
	res.Bare = bare
	saved := r.cfg.Duration
	r.cfg.Duration = sc.StepDuration
	steps, err := e.stepUp(ctx, "soak search", stepRates(bare, soakSearchSteps), e2eCreditFine*bare, e.creditStep)
	r.cfg.Duration = saved
	res.Steps = steps
	if err != nil {
		return err
	}
	for _, s := range steps {
		if !s.ok() {
			break
		}
		res.Sustainable = s.Offered
	}
	if res.Sustainable == 0 {
		return fmt.Errorf("soak search: no step held (every acknowledged webhook credited, p99 ≤ 1 s)")
	}
	res.Rate = math.Max(10, math.Round(sc.Share*res.Sustainable))
	r.progress("soak: sustainable %.0f /s; soaking at %.0f /s (%.0f %%)", res.Sustainable, res.Rate, 100*sc.Share)
	// The search's burst leaves dead rows behind: vacuum as autovacuum
	// would have by now, so the first window does not pay for the search.
	return vacuumIfAutovacuumIsOff(ctx, r, e.pool, "soak")
}

// soakSearchSteps are the e2e scenario's credit steps with two lower ones
// before them: on a machine shared with other work the e2e's lowest step
// may not hold, and a soak needs a rate.
var soakSearchSteps = append([]float64{0.05, 0.1}, e2eCreditSteps...)

// soakAck is a soak webhook's answer.
type soakAck struct {
	due, at         time.Duration
	answered, acked bool
}

// soakLoad offers res.Rate webhooks/s open loop for the configured
// duration, meanwhile reading the credits, the tables and the plans and
// measuring each window's CPU; then waits for the backlog and fills res.
func (e *e2eRun) soakLoad(ctx context.Context, res *SoakResult, plans *planWatch, prof *profiler) error {
	sc := res.Config
	n := int(res.Rate * sc.Duration.Seconds())
	res.Sent = n
	acks := make([]soakAck, n)
	credits := newCreditLog(n)
	var (
		errMu    sync.Mutex
		firstErr string
		failures int
	)
	e.r.progress("soak: %.0f /s for %s (%d webhooks), windows of %s, sampling every %s", res.Rate, sc.Duration, n, res.Window, sc.Sample)

	start := time.Now()
	bg, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	// A failed sample, read or meter loses that reading, not the run: it
	// is said, and the next one tries again (a credit a failed read
	// missed is found by the look-up after the load).
	fail := func(what string, err error) {
		if err != nil && !errors.Is(err, context.Canceled) {
			e.r.progress("soak: %s: %v", what, err)
		}
	}
	sample := func(ctx context.Context) error {
		at := time.Since(start)
		s, err := sampleTables(ctx, e.pool, at)
		if err != nil {
			return err
		}
		res.Samples = append(res.Samples, s)
		return plans.sample(ctx, at)
	}
	if err := sample(ctx); err != nil {
		cancel()
		return err
	}
	// Sizes, vacuum counters and plans, every sample.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(sc.Sample)
		defer t.Stop()
		for {
			select {
			case <-bg.Done():
				return
			case <-t.C:
				fail("sample", sample(bg))
			}
		}
	}()
	// The credits, every creditPollEvery.
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(creditPollEvery)
		defer t.Stop()
		for {
			select {
			case <-bg.Done():
				return
			case <-t.C:
				_, err := credits.poll(bg, e.pool, start)
				fail("read the credits", err)
			}
		}
	}()
	// CPU and memory per window.
	nw := int((sc.Duration + res.Window - 1) / res.Window)
	usage := make([][]procUsage, nw)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range nw {
			m, err := e.meterFor(bg)
			if err != nil {
				fail("CPU meter", err)
				return
			}
			m.begin()
			end := min(time.Duration(i+1)*res.Window, sc.Duration)
			select {
			case <-bg.Done():
				// The load ended first (the last window's end, or an
				// interrupt): the window so far.
				usage[i] = m.end()
				return
			case <-time.After(time.Until(start.Add(end))):
			}
			usage[i] = m.end()
			e.r.progress("soak: window %d of %d ended at %s: %s", i+1, nw, clock(end), usageString(usage[i]))
		}
	}()

	// The CPU profiles, mid-window in the first window and the last.
	if prof != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, i := range profiledWindows(nw) {
				end := min(time.Duration(i+1)*res.Window, sc.Duration)
				from := time.Duration(i) * res.Window
				at := from + max(0, (end-from-soakProfileLen)/2)
				select {
				case <-bg.Done():
					return
				case <-time.After(time.Until(start.Add(at))):
				}
				p := prof.capture(bg, i+1, e.r.progress)
				res.Profiles = append(res.Profiles, p)
				e.r.progress("soak: window %d profiled: %d files in %s", i+1, len(p.Files), prof.dir)
			}
		}()
	}

	openLoop(ctx, res.Rate, n, e2eSenders, func(it item) {
		id := "evt_soak_" + strconv.Itoa(it.n)
		user := "e2e-user-" + strconv.Itoa(it.n%e2eUsers)
		now := time.Now().Unix()
		body := stripeBody(id, user, now)
		a := soakAck{due: it.due.Sub(start)}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.base+"/webhooks/stripe", bytes.NewReader(body))
		if err == nil {
			req.Header.Set("Stripe-Signature", sign(body, now))
			req.Header.Set("Content-Type", "application/json")
			var status int
			status, _, err = e.do(req)
			a.at = time.Since(start)
			a.answered = status != 0
			a.acked = err == nil && status == http.StatusOK
			if err == nil && !a.acked {
				err = fmt.Errorf("webhook answered %d", status)
			}
		}
		acks[it.n] = a
		if err != nil {
			errMu.Lock()
			failures++
			if firstErr == "" {
				firstErr = err.Error()
			}
			errMu.Unlock()
		}
	})
	loadEnd := time.Since(start)
	if failures > 0 {
		e.r.progress("soak: %d webhooks not acknowledged, first: %s", failures, firstErr)
	}
	// The CPU meters end with the load; the sampler keeps going while the
	// backlog drains.
	acked := 0
	for _, a := range acks {
		if a.acked {
			acked++
		}
	}
	e.r.progress("soak: load done after %s: %d acknowledged; waiting for their credits", loadEnd.Round(time.Second), acked)
	cancel()
	wg.Wait()
	if err := credits.drain(ctx, e.pool, start, acks); err != nil {
		return err
	}
	res.Drain = time.Since(start) - loadEnd
	fail("last sample", sample(ctx))

	reqs := make([]soakReq, n)
	for i, a := range acks {
		reqs[i] = soakReq{due: a.due, ackAt: a.at, answered: a.answered, acked: a.acked}
		if at, ok := credits.at(i); ok {
			reqs[i].credited, reqs[i].creditAt = true, at
		}
	}
	res.Windows = soakWindows(reqs, res.Window, sc.Duration)
	for i := range res.Windows {
		if i < len(usage) {
			res.Windows[i].Usage = usage[i]
		}
	}
	return nil
}

// creditPollEvery is how often the soak reads the new credits, and
// creditPollMargin how far before the previous read each read starts: a
// credit's id (a UUIDv7) is made just before its transaction, so a read
// from an id a margin earlier sees every credit committed since. A credit
// whose transaction took longer than the margin is found by the final
// look-up by reference (creditLog.drain).
const (
	creditPollEvery  = 5 * time.Second
	creditPollMargin = 5 * time.Second
)

// creditLog is when each soak webhook's credit was committed (its row's
// now()), found by reading the ledger's new credits as they come: by id
// range (the primary key: UUIDv7s are in time order), so a read costs the
// credits since the last one, not the ledger.
type creditLog struct {
	when  []time.Duration
	found []bool
	count int
	// since is when the previous read started.
	since time.Time
}

func newCreditLog(n int) *creditLog {
	return &creditLog{when: make([]time.Duration, n), found: make([]bool, n)}
}

func (c *creditLog) at(i int) (time.Duration, bool) { return c.when[i], c.found[i] }

// uuidV7Floor is the least UUIDv7 of the millisecond t: its timestamp, the
// rest zero. UUIDs compare bytewise in Postgres.
func uuidV7Floor(t time.Time) string {
	var b [16]byte
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(t.UnixMilli()))
	copy(b[:6], ms[2:])
	h := fmt.Sprintf("%x", b)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// record notes the credit of reference at (if it is a soak webhook's).
func (c *creditLog) record(ref string, at time.Duration) {
	if !strings.HasPrefix(ref, soakRefPrefix) {
		return
	}
	i, err := strconv.Atoi(ref[len(soakRefPrefix):])
	if err != nil || i < 0 || i >= len(c.found) || c.found[i] {
		return
	}
	c.found[i], c.when[i] = true, at
	c.count++
}

// poll reads the credits committed since the previous poll (less the
// margin) and returns how many new ones it found.
func (c *creditLog) poll(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, start time.Time) (int, error) {
	from := c.since
	if from.IsZero() {
		from = start
	}
	c.since = time.Now()
	rows, err := q.Query(ctx, `SELECT reference, created_at FROM ledger_transactions WHERE id >= $1::uuid AND kind = 'credit'`,
		uuidV7Floor(from.Add(-creditPollMargin)))
	if err != nil {
		return 0, fmt.Errorf("read the credits: %w", err)
	}
	defer rows.Close()
	before := c.count
	for rows.Next() {
		var ref string
		var at time.Time
		if err := rows.Scan(&ref, &at); err != nil {
			return 0, fmt.Errorf("read the credits: %w", err)
		}
		c.record(ref, at.Sub(start))
	}
	return c.count - before, rows.Err()
}

// drain polls until every acknowledged webhook is credited or none was for
// e2eDrain, then looks the missing ones up by reference (the ledger's
// unique (kind, reference)): a credit the id range missed is still found.
func (c *creditLog) drain(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, start time.Time, acks []soakAck) error {
	missing := func() []string {
		var refs []string
		for i, a := range acks {
			if a.acked && !c.found[i] {
				refs = append(refs, soakRefPrefix+strconv.Itoa(i))
			}
		}
		return refs
	}
	last := time.Now()
	for len(missing()) > 0 && time.Since(last) < e2eDrain {
		n, err := c.poll(ctx, q, start)
		if err != nil {
			return err
		}
		if n > 0 {
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(creditPollEvery):
		}
	}
	refs := missing()
	for len(refs) > 0 {
		chunk := refs[:min(len(refs), 1000)]
		refs = refs[len(chunk):]
		rows, err := q.Query(ctx, `SELECT reference, created_at FROM ledger_transactions WHERE kind = 'credit' AND reference = ANY($1)`, chunk)
		if err != nil {
			return fmt.Errorf("look the missing credits up: %w", err)
		}
		for rows.Next() {
			var ref string
			var at time.Time
			if err := rows.Scan(&ref, &at); err != nil {
				rows.Close()
				return fmt.Errorf("look the missing credits up: %w", err)
			}
			c.record(ref, at.Sub(start))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	return nil
}

// dropDB drops a database the run made (best effort: a run reports its
// figures, not its cleanup).
func (r *Runner) dropDB(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, r.cfg.AdminURL)
	if err != nil {
		r.progress("drop %s: %v", name, err)
		return
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		r.progress("drop %s: %v", name, err)
	}
}
