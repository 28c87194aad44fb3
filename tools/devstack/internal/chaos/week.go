package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/aegis-payments/aegis/tools/devstack/internal/psp"
)

// Fault kinds of the week profile: each spans simulated hours to a day.
const (
	// faultWorkerOutADay: both workers SIGKILLed while a payout call
	// executes at the PSP, and not back for a simulated day and a tenth:
	// longer than the PSP keeps the call's Idempotency-Key. The payouts
	// created meanwhile stay pending at the PSP for two simulated days,
	// so no payout.paid finishes them before the workers come back.
	faultWorkerOutADay = "worker_killed_in_psp_call_out_a_day"
	// faultPostgresAway: the run's database refuses connections (every
	// session ended) for longer than the workers retry in place, while
	// payout calls are in flight: their outcomes cannot be recorded.
	faultPostgresAway = "postgres_away_past_retry_in_place"
	// faultPSP503After: the PSP executes every create, then answers 503
	// (saved under the key, so a retry with it gets the 503 again).
	faultPSP503After = "psp_503_after_executing"
	// faultPaystackOTP: Paystack transfers wait in "otp" for a simulated
	// day before the stand-in completes them.
	faultPaystackOTP = "paystack_transfer_stuck_on_otp"
	// faultPendingDays: payouts created meanwhile stay pending at the PSP
	// for two simulated days.
	faultPendingDays = "psp_payouts_pending_for_days"
	// faultReceiverDown: the flaky endpoint's receiver answers 503 for
	// six simulated hours (receiverDownFor); the steady one stays up.
	faultReceiverDown = "settlement_receiver_down"
)

// weekFaults is the week profile's cycle: the long faults (the worker out
// for a day twice: it is the one that reaches a forgotten key), and those
// of the other profiles that stay meaningful when a day is 30 s.
func weekFaults() []string {
	return []string{faultWorkerOutADay, faultWorkerOutADay, faultPostgresAway, faultPSP503After, faultPaystackOTP, faultPendingDays,
		faultReceiverDown, faultKillRelay, faultKillWorker, faultKafkaLeader, faultPGKill, faultPSP5xx, faultPSPDrop}
}

// injectWeek injects the week profile's own faults; ok is false for a kind
// it does not know.
func (in *injector) injectWeek(ctx context.Context, kind string) (ok bool, err error) {
	p := in.profile
	switch kind {
	case faultWorkerOutADay:
		return true, in.workerOutADay(ctx)
	case faultPostgresAway:
		return true, in.postgresAway(ctx)
	case faultPSP503After:
		return true, in.pspFor(ctx, `{"error_after_create_rate":1,"error_status":503}`, p.Sim(time.Hour+in.rngHours(2)))
	case faultPaystackOTP:
		return true, in.paystackOTP(ctx)
	case faultPendingDays:
		return true, in.pspFor(ctx, fmt.Sprintf(`{"pending_for":%q}`, p.Sim(2*simDay)), p.Sim(2*time.Hour))
	case faultReceiverDown:
		if in.sink == nil {
			return true, errNoTarget
		}
		in.sink.setDown(true)
		sleep(context.WithoutCancel(ctx), p.Sim(receiverDownFor))
		in.sink.setDown(false)
		return true, nil
	}
	return false, nil
}

// otpWant is how many Paystack transfers the OTP fault waits to see held
// in "otp" before it ends (otpPayouts of its own make them likely).
const (
	otpWant    = 3
	otpPayouts = 4
)

// paystackOTP holds every Paystack transfer made for a simulated two hours
// (longer, up to twelve, until otpWant were seen) in "otp" for a simulated
// day. The workload alone makes about one Paystack payout in two simulated
// hours, and one that reaches the PSP only after the window, or is refused
// for want of a naira balance, never meets the fault: so the fault sends
// otpPayouts funded Paystack payouts of its own, and notes the transfers
// held while the fault is on, not only at its end.
func (in *injector) paystackOTP(ctx context.Context) error {
	p := in.profile
	if err := in.pspFaults(fmt.Sprintf(`{"provider":"paystack","otp_for":%q}`, p.Sim(simDay))); err != nil {
		return err
	}
	start, before := time.Now(), in.otpCount()
	var wg sync.WaitGroup
	if in.work != nil {
		for i := 0; i < otpPayouts; i++ {
			user := in.work.user(in.rng.IntN(in.work.users))
			amount := int64(100 + in.rng.IntN(1900))
			wg.Add(1)
			go func() { defer wg.Done(); in.work.fundedPaystackPayout(user, amount*100) }()
		}
	}
	var seen int
	var err error
	for {
		sleep(ctx, 250*time.Millisecond)
		var all int
		if all, err = in.noteOTP(); err != nil {
			break
		}
		seen = all - before
		elapsed := time.Since(start)
		if ctx.Err() != nil || elapsed >= p.Sim(12*time.Hour) || (elapsed >= p.Sim(2*time.Hour) && seen >= otpWant) {
			break
		}
	}
	wg.Wait()
	if seen < otpWant {
		in.log("fault %s: only %d Paystack transfers seen waiting for an OTP", faultPaystackOTP, seen)
	}
	return errors.Join(err, in.pspFaults(""))
}

func (in *injector) otpCount() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.otpHeld)
}

// noteOTP records the Paystack transfers the stand-in holds in "otp" now
// and not recorded before (invariant 17 wants each alerted on), and
// returns how many are recorded in all.
func (in *injector) noteOTP() (int, error) {
	resp, err := http.Get(in.psp + "/_psp/objects?provider=paystack")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var v struct {
		Items []pspObject `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return 0, fmt.Errorf("PSP objects: %w", err)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	known := make(map[string]bool, len(in.otpHeld))
	for _, o := range in.otpHeld {
		known[o.ID] = true
	}
	for _, o := range v.Items {
		if o.Status == "otp" && !known[o.ID] {
			in.otpHeld = append(in.otpHeld, o)
			known[o.ID] = true
		}
	}
	return len(in.otpHeld), nil
}

// rngHours is a seeded whole number of hours in [0, n].
func (in *injector) rngHours(n int) time.Duration { return time.Duration(in.rng.IntN(n+1)) * time.Hour }

// pspFor sets PSP faults for d of wall time, then clears them.
func (in *injector) pspFor(ctx context.Context, spec string, d time.Duration) error {
	if err := in.pspFaults(spec); err != nil {
		return err
	}
	sleep(ctx, d)
	return in.pspFaults("")
}

// waitExecuting waits up to 10 s for want payout creates the PSP is
// executing at once (their keys held during the injected latency), or
// settles for fewer at the end; errNoTarget if none came. Several at once
// make it likely one of them pays (a create to an invalid destination
// moves nothing).
func (in *injector) waitExecuting(ctx context.Context, want int) error {
	deadline := time.Now().Add(10 * time.Second)
	best := 0
	for ctx.Err() == nil && time.Now().Before(deadline) {
		calls, err := in.pspCalls()
		if err != nil {
			return err
		}
		n := 0
		for _, c := range calls {
			if c.Outcome == psp.OutcomeExecuting {
				n++
			}
		}
		if n >= want {
			return nil
		}
		best = max(best, n)
		sleep(ctx, 50*time.Millisecond)
	}
	if best > 0 {
		return in.waitExecuting(ctx, 1)
	}
	return errNoTarget
}

func (in *injector) pspCalls() ([]psp.CallRecord, error) {
	resp, err := http.Get(in.psp + "/_psp/calls")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var calls psp.CallsView
	if err := json.NewDecoder(resp.Body).Decode(&calls); err != nil {
		return nil, fmt.Errorf("PSP calls: %w", err)
	}
	return calls.Items, nil
}

func (in *injector) workerOutADay(ctx context.Context) error {
	p := in.profile
	// Creates take 800 ms at the PSP and what they create stays pending
	// for two simulated days.
	if err := in.pspFaults(fmt.Sprintf(`{"provider":"stripe","latency":"800ms","pending_for":%q}`, p.Sim(2*simDay))); err != nil {
		return err
	}
	if err := in.waitExecuting(ctx, 3); err != nil {
		_ = in.pspFaults("")
		return err
	}
	workers := []string{"payout-worker", "payout-worker-2"}
	killed := time.Now()
	for _, name := range workers {
		if err := in.s.Kill(name); err != nil {
			return err
		}
	}
	in.log("fault %s: both workers killed with a payout call executing at the PSP; back in %s", faultWorkerOutADay,
		p.Sim(simDay+simDay/10))
	// The creates in flight finish at the PSP (pending for days); then
	// the faults go, and the workers stay away past the PSP's key window,
	// even when the fault phase ends meanwhile.
	sleep(ctx, time.Second)
	if err := in.pspFaults(""); err != nil {
		return err
	}
	sleep(context.WithoutCancel(ctx), p.Sim(simDay+simDay/10)-time.Second)
	for _, name := range workers {
		if err := in.s.Relaunch(name); err != nil {
			return err
		}
	}
	in.outageUntil(killed, time.Now().Add(crashSessionTimeout))
	in.mu.Lock()
	in.workersDown = append(in.workersDown, [2]time.Time{killed, time.Now().Add(crashSessionTimeout)})
	in.mu.Unlock()
	return nil
}

func (in *injector) postgresAway(ctx context.Context) error {
	p := in.profile
	if in.adminURL == "" {
		return errNoTarget
	}
	if err := in.pspFaults(`{"latency":"600ms"}`); err != nil {
		return err
	}
	if err := in.waitExecuting(ctx, 1); err != nil {
		_ = in.pspFaults("")
		return err
	}
	admin, err := pgx.Connect(ctx, in.adminURL)
	if err != nil {
		return err
	}
	defer admin.Close(context.WithoutCancel(ctx))
	// Longer than the in-place retry, so the command is dead-lettered (or
	// the worker gives up) with the PSP's answer unrecorded.
	retryFor := ScaledEnv(p.TimeScale, ReadWorker)["WORKER_RETRY_IN_PLACE_FOR"]
	away := p.Sim(3 * time.Hour)
	if d, err := time.ParseDuration(retryFor); err == nil {
		away = max(away, 3*d)
	}
	start := time.Now()
	if _, err := admin.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{in.dbName}.Sanitize()+` WITH ALLOW_CONNECTIONS false`); err != nil {
		return err
	}
	restore := func() error {
		_, err := admin.Exec(context.WithoutCancel(ctx), `ALTER DATABASE `+pgx.Identifier{in.dbName}.Sanitize()+` WITH ALLOW_CONNECTIONS true`)
		return err
	}
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = $1 AND backend_type = 'client backend'`, in.dbName); err != nil {
		return errJoin(err, restore())
	}
	in.log("fault %s: database refuses connections for %s", faultPostgresAway, away)
	sleep(context.WithoutCancel(ctx), away)
	if err := restore(); err != nil {
		return err
	}
	in.outage(start)
	if err := in.pspFaults(""); err != nil {
		return err
	}
	// A service that gave up on Postgres and exited is started again, as
	// an orchestrator would.
	for _, name := range []string{"webhook-api", "outbox-relay", "outbox-relay-2", "payout-worker", "payout-worker-2", "dlq-admin"} {
		if !in.s.Running(name) {
			in.log("fault %s: %s exited while Postgres was away; starting it again", faultPostgresAway, name)
			if err := in.s.Relaunch(name); err != nil {
				return err
			}
		}
	}
	return nil
}

func errJoin(a, b error) error {
	if b == nil {
		return a
	}
	return errors.Join(a, fmt.Errorf("restoring connections: %w", b))
}

// sink receives the outbound events the services send, at one receiver
// per endpoint chaos registers (outbound.go): each verifies every delivery's Standard Webhooks
// signature with the specification's library and counts the deliveries it
// accepted per webhook-id. While down (faultReceiverDown) the flaky
// receiver refuses every delivery with 503.
type sink struct {
	srv *http.Server
	url string

	mu        sync.Mutex
	down      bool
	receivers map[string]*receiver
}

// receiver is one endpoint's side of the sink.
type receiver struct {
	// flaky: the receiver-down fault refuses its deliveries.
	flaky bool
	// endpointID is the endpoint's id at dlq-admin; wh verifies with its
	// secret (nil until the endpoint is registered: deliveries are
	// refused with 503, and counted in notReady).
	endpointID string
	wh         *standardwebhooks.Webhook
	// got counts the deliveries accepted per webhook-id (the event id).
	got map[string]int
	// unverified names the deliveries the library refused, or whose
	// webhook-id is not the body's event_id; each was answered 401.
	unverified []string
	refused    int
	notReady   int
}

// Receivers of the sink: the endpoints chaos registers.
const (
	receiverFlaky  = "flaky"
	receiverSteady = "steady"
)

func startSink() (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	k := &sink{url: "http://" + ln.Addr().String(), receivers: map[string]*receiver{
		receiverFlaky:  {flaky: true, got: map[string]int{}},
		receiverSteady: {got: map[string]int{}},
	}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /outbound/{name}", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		w.WriteHeader(k.receive(r.PathValue("name"), r.Header, body))
	})
	k.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = k.srv.Serve(ln) }() // ends with Close
	return k, nil
}

// endpointURL is where the receiver name listens.
func (k *sink) endpointURL(name string) string { return k.url + "/outbound/" + name }

// receive handles one delivery to the receiver name and returns the status
// to answer.
func (k *sink) receive(name string, h http.Header, body []byte) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	rc := k.receivers[name]
	switch {
	case rc == nil:
		return http.StatusNotFound
	case rc.wh == nil:
		rc.notReady++
		return http.StatusServiceUnavailable
	case rc.flaky && k.down:
		rc.refused++
		return http.StatusServiceUnavailable
	}
	id := h.Get("webhook-id")
	if err := rc.wh.Verify(body, h); err != nil {
		rc.unverified = append(rc.unverified, fmt.Sprintf("%s: %v", id, err))
		return http.StatusUnauthorized
	}
	var ev struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.EventID != id {
		rc.unverified = append(rc.unverified, fmt.Sprintf("%s: webhook-id is not the body's event_id %q", id, ev.EventID))
		return http.StatusUnauthorized
	}
	rc.got[id]++
	return http.StatusOK
}

// register sets the endpoint id and secret of the receiver name.
func (k *sink) register(name, endpointID, secret string) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return fmt.Errorf("receiver %s: the endpoint's secret: %w", name, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	rc := k.receivers[name]
	if rc == nil {
		return fmt.Errorf("no receiver %s", name)
	}
	rc.endpointID, rc.wh = endpointID, wh
	return nil
}

func (k *sink) close() {
	if k != nil {
		_ = k.srv.Close()
	}
}

func (k *sink) setDown(down bool) {
	k.mu.Lock()
	k.down = down
	k.mu.Unlock()
}

// receiverSnapshot is a copy of one receiver's record.
type receiverSnapshot struct {
	Name, EndpointID     string
	Got                  map[string]int
	Unverified           []string
	Refused, NotReady    int
	Delivered, Duplicate int
}

// snapshot copies every receiver's record, by name order.
func (k *sink) snapshot() []receiverSnapshot {
	k.mu.Lock()
	defer k.mu.Unlock()
	names := slices.Sorted(maps.Keys(k.receivers))
	out := make([]receiverSnapshot, 0, len(names))
	for _, name := range names {
		rc := k.receivers[name]
		s := receiverSnapshot{Name: name, EndpointID: rc.endpointID, Got: maps.Clone(rc.got),
			Unverified: slices.Clone(rc.unverified), Refused: rc.refused, NotReady: rc.notReady}
		for _, n := range rc.got {
			s.Delivered++
			s.Duplicate += n - 1
		}
		out = append(out, s)
	}
	return out
}
