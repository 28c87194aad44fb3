package stack

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/migrations"
)

// Ports are the loopback ports of the suite.
type Ports struct {
	WebhookAPI, OutboxRelay, PayoutWorker, DLQAdmin, Kafka, PSP int
}

// DevPorts are the services' default ports (docs/design/contract.md), used by `make dev`.
func DevPorts() Ports {
	return Ports{WebhookAPI: 8080, OutboxRelay: 8081, PayoutWorker: 8082, DLQAdmin: 8083, Kafka: 9092, PSP: 12111}
}

// Secrets are the credentials the stack is configured with. They are local
// development values, printed by `make dev`; nothing real.
type Secrets struct {
	StripeWebhookSecret string
	StripeSecretKey     string
	PaystackSecretKey   string
	APITokens           string
	DLQAdminTokens      string
	// EventSigningKey is AEGIS_EVENT_SIGNING_KEY: webhook-api signs money
	// events with it, payout-worker verifies them (pkg/eventproof); dev
	// tools that produce money events straight to Kafka sign with it too.
	EventSigningKey string
	// ErasureKey is dlq-admin's ERASURE_KEY: the key of erased users'
	// pseudonyms (aegisctl users erase).
	ErasureKey string
}

// DevEventSigningKey is the development AEGIS_EVENT_SIGNING_KEY (dev.env
// has the same): the key the dev tools, e2e tests, chaos and bench sign the
// money events they produce straight to Kafka with.
const DevEventSigningKey = "aegis-dev-event-signing-key-0123456789"

// DevSecrets are the values `make dev` uses unless the environment sets them.
func DevSecrets() Secrets {
	return Secrets{
		StripeWebhookSecret: "whsec_aegis_local_dev",
		StripeSecretKey:     "sk_test_aegis_local_dev",
		PaystackSecretKey:   "sk_test_paystack_local_dev",
		APITokens:           "dev:dev-api-token-0123456789",
		EventSigningKey:     DevEventSigningKey,
		ErasureKey:          "aegis-dev-erasure-key-0123456789abcdef",
		// Two operators, so that four eyes (REQUIRE_SECOND_APPROVER) can be
		// tried: sam approves what ops asked for.
		DLQAdminTokens: "ops:operator:dev-ops-token-0123456789,night:viewer:dev-viewer-token-0123456789," +
			"sam:operator:dev-ops2-token-0123456789",
	}
}

// Config describes one stack.
type Config struct {
	// BinDir holds the binaries (make build's bin/).
	BinDir  string
	Ports   Ports
	Secrets Secrets
	// DatabaseURL is the schema owner's (the migrator's) URL. Each service
	// connects as its own role (migrations.ServiceRoles): the URL in
	// ServiceDatabaseURLs under the service's name, or else DatabaseURL
	// with the user swapped for the role and no password (trust auth on
	// the loopback), which Start makes a login role.
	DatabaseURL         string
	ServiceDatabaseURLs map[string]string
	RedisURL            string
	// KafkaDataDir persists kfake's data (empty: memory only).
	KafkaDataDir string
	// PSPSettleDelay is how long the PSP stand-in waits before paying a
	// payout and sending its webhook ("0" never).
	PSPSettleDelay string
	// Env adds or overrides variables for every service.
	Env map[string]string
	// ServiceEnv adds or overrides variables for one process, by its name
	// (payout-worker, payout-worker-2 for a second replica), over Env: a
	// setting that must differ per process, such as PPROF_ADDR.
	ServiceEnv map[string]map[string]string
	// Replicas runs extra relay and worker replicas (0 means one each).
	RelayReplicas, WorkerReplicas int
	// KafkaEnv adds variables for the Kafka stand-in (KAFKA_ADMIN_ADDR).
	KafkaEnv map[string]string
	// PSPEnv adds or overrides variables for the PSP stand-in
	// (PSP_IDEMPOTENCY_WINDOW, PSP_SETTLE_DELAY).
	PSPEnv map[string]string
	// Bins runs a service (by its binary's name, e.g. payout-worker) from
	// another path than BinDir's: a test-only build.
	Bins map[string]string
}

// Proc is one running process of the stack.
type Proc struct {
	Name string
	path string
	env  map[string]string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Stack is a running suite.
type Stack struct {
	cfg   Config
	out   *lineWriter
	procs []*Proc
	// exited receives each process that exits on its own.
	exited chan *Proc
}

// URL returns the base URL of a service by port.
func URL(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) }

// New returns an empty stack whose processes write to out; Launch adds them.
// Start is New plus the whole suite.
func New(cfg Config, out io.Writer) *Stack {
	return &Stack{cfg: cfg, out: &lineWriter{w: out}, exited: make(chan *Proc, 16)}
}

// Start launches the suite and waits until every service answers /readyz.
// Output of every process goes to out, line by line.
func Start(ctx context.Context, cfg Config, out io.Writer) (*Stack, error) {
	s := New(cfg, out)
	p := cfg.Ports
	kafkaAddr := fmt.Sprintf("127.0.0.1:%d", p.Kafka)
	base := map[string]string{
		"DATABASE_URL":  cfg.DatabaseURL,
		"REDIS_URL":     cfg.RedisURL,
		"KAFKA_BROKERS": kafkaAddr,
		"LOG_LEVEL":     "info",
	}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		for k, v := range cfg.Env {
			m[k] = v
		}
		return m
	}
	dbURLs, err := serviceDatabaseURLs(ctx, cfg)
	if err != nil {
		return nil, err
	}
	settle := cfg.PSPSettleDelay
	if settle == "" {
		settle = "2s"
	}

	kafkaEnv := map[string]string{"KAFKA_PORT": strconv.Itoa(p.Kafka), "KAFKA_DATA_DIR": cfg.KafkaDataDir}
	for k, v := range cfg.KafkaEnv {
		kafkaEnv[k] = v
	}
	if err := s.Launch("kafka", "aegis-kafka", kafkaEnv); err != nil {
		return s.abort(err)
	}
	pspEnv := map[string]string{
		"PSP_ADDR":               fmt.Sprintf("127.0.0.1:%d", p.PSP),
		"PSP_SETTLE_DELAY":       settle,
		"PSP_STRIPE_WEBHOOK_URL": URL(p.WebhookAPI) + "/webhooks/stripe",
		// The stand-in's own copies of the secrets the services verify with.
		"PSP_STRIPE_WEBHOOK_SECRET": cfg.Secrets.StripeWebhookSecret,
		"PSP_PAYSTACK_WEBHOOK_URL":  URL(p.WebhookAPI) + "/webhooks/paystack",
		"PSP_PAYSTACK_SECRET_KEY":   cfg.Secrets.PaystackSecretKey,
	}
	for k, v := range cfg.PSPEnv {
		pspEnv[k] = v
	}
	if err := s.Launch("psp", "aegis-psp", pspEnv); err != nil {
		return s.abort(err)
	}
	if err := s.WaitHTTP(ctx, URL(p.PSP)+"/healthz"); err != nil {
		return s.abort(err)
	}

	services := []struct {
		name, bin string
		port      int
		env       map[string]string
		replicas  int
	}{
		{"webhook-api", "webhook-api", p.WebhookAPI, map[string]string{
			"STRIPE_WEBHOOK_SECRET":   cfg.Secrets.StripeWebhookSecret,
			"PAYSTACK_SECRET_KEY":     cfg.Secrets.PaystackSecretKey,
			"API_TOKENS":              cfg.Secrets.APITokens,
			"AEGIS_EVENT_SIGNING_KEY": cfg.Secrets.EventSigningKey,
			// The PSP reconciliation reads the stand-in's record.
			"STRIPE_SECRET_KEY": cfg.Secrets.StripeSecretKey,
			"STRIPE_API_BASE":   URL(p.PSP),
			"PAYSTACK_API_BASE": URL(p.PSP),
		}, 1},
		// The relay delivers settlement events to the endpoints, which a
		// local stack's receivers serve on http on the loopback: allowed
		// here, refused by default (docs/design/outbound.md).
		{"outbox-relay", "outbox-relay", p.OutboxRelay, localOutbound(nil), max(1, cfg.RelayReplicas)},
		{"payout-worker", "payout-worker", p.PayoutWorker, map[string]string{
			"STRIPE_SECRET_KEY":       cfg.Secrets.StripeSecretKey,
			"STRIPE_API_BASE":         URL(p.PSP),
			"PAYSTACK_SECRET_KEY":     cfg.Secrets.PaystackSecretKey,
			"PAYSTACK_API_BASE":       URL(p.PSP),
			"AEGIS_EVENT_SIGNING_KEY": cfg.Secrets.EventSigningKey,
		}, max(1, cfg.WorkerReplicas)},
		{"dlq-admin", "dlq-admin", p.DLQAdmin, localOutbound(map[string]string{"DLQ_ADMIN_TOKENS": cfg.Secrets.DLQAdminTokens,
			// Operators enter the OTP of a Paystack transfer waiting for one.
			"PAYSTACK_SECRET_KEY": cfg.Secrets.PaystackSecretKey, "PAYSTACK_API_BASE": URL(p.PSP),
			"ERASURE_KEY": cfg.Secrets.ErasureKey}), 1},
	}
	var ready []waitFor
	for _, svc := range services {
		for r := 0; r < svc.replicas; r++ {
			port := svc.port
			name := svc.name
			if r > 0 {
				// Extra replicas listen on ports after the dev range.
				port = svc.port + 100*r
				name = fmt.Sprintf("%s-%d", svc.name, r+1)
			}
			env := with(svc.env)
			for k, v := range cfg.ServiceEnv[name] {
				env[k] = v
			}
			env["DATABASE_URL"] = dbURLs[svc.name]
			env["HTTP_ADDR"] = fmt.Sprintf("127.0.0.1:%d", port)
			if err := s.Launch(name, svc.bin, env); err != nil {
				return s.abort(err)
			}
			ready = append(ready, waitFor{name, URL(port) + "/readyz"})
		}
	}
	if err := s.waitReady(ctx, ready); err != nil {
		return s.abort(err)
	}
	return s, nil
}

// localOutbound adds to env what lets outbox-relay deliver to, and
// dlq-admin register, endpoints on http and on the loopback: every receiver
// of a local stack (make dev's, the e2e tests', chaos's, the bench's) is one.
func localOutbound(env map[string]string) map[string]string {
	if env == nil {
		env = map[string]string{}
	}
	env["OUTBOUND_ALLOW_HTTP"] = "true"
	env["OUTBOUND_ALLOW_PRIVATE"] = "true"
	return env
}

// waitFor is a service of the stack and the URL that answers 200 once it is
// ready.
type waitFor struct{ name, url string }

// waitReady waits until every service of ready answers. A service that exits
// before it is ready is started again, up to startAttempts times in all.
func (s *Stack) waitReady(ctx context.Context, ready []waitFor) error {
	isService := map[string]bool{}
	for _, w := range ready {
		isService[w.name] = true
	}
	starts := map[string]int{}
	for _, w := range ready {
		for {
			err := s.WaitHTTP(ctx, w.url)
			var exited *ExitedError
			if !errors.As(err, &exited) || !isService[exited.Proc.Name] || starts[exited.Proc.Name] >= startAttempts-1 {
				if err != nil {
					return err
				}
				break
			}
			// The services do not retry what they check at startup
			// (Postgres answering within 5 s, with a free connection
			// slot): a process manager restarts them. On a loaded
			// machine, with other stacks on the same server, that
			// happens; so the stack restarts them too, a bounded number
			// of times, and says so.
			// Like a process manager, it waits longer before each restart:
			// a shortage of connection slots outlasts an instant retry.
			starts[exited.Proc.Name]++
			delay := time.Duration(starts[exited.Proc.Name]) * restartDelay
			s.out.line(fmt.Sprintf("stack: %s exited during startup (%v); starting it again in %s (%d of %d), as a process manager would",
				exited.Proc.Name, exited.Proc.exitErr(), delay, starts[exited.Proc.Name]+1, startAttempts))
			s.forgetExit(exited.Proc)
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s: %w", exited.Error(), ctx.Err())
			case <-time.After(delay):
			}
			if err := s.Relaunch(exited.Proc.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

// startAttempts is how many times Start (and RestartWith) starts a service
// that exits before it is ready; restartDelay times the restart's number is
// the wait before it (1 s, 2 s, 3 s, 4 s: ten seconds in all).
const (
	startAttempts = 5
	restartDelay  = time.Second
)

// ExitedError is WaitHTTP's answer when a process of the stack exited.
type ExitedError struct{ Proc *Proc }

func (e *ExitedError) Error() string {
	return fmt.Sprintf("%s exited during startup: %v", e.Proc.Name, e.Proc.exitErr())
}

func (p *Proc) exitErr() error { return cmp.Or(p.err, errors.New("exit status 0")) }

// forgetExit takes p's exit off the Exited channel: Start restarted it.
func (s *Stack) forgetExit(p *Proc) {
	var keep []*Proc
	for {
		select {
		case q := <-s.exited:
			if q != p {
				keep = append(keep, q)
			}
			continue
		default:
		}
		break
	}
	for _, q := range keep {
		select {
		case s.exited <- q:
		default:
		}
	}
}

// serviceDatabaseURLs returns the DATABASE_URL of each service (see
// Config.DatabaseURL), making the roles it derives a URL for logins.
func serviceDatabaseURLs(ctx context.Context, cfg Config) (map[string]string, error) {
	urls := map[string]string{}
	var owner *pgx.Conn
	defer func() {
		if owner != nil {
			_ = owner.Close(context.WithoutCancel(ctx)) // nothing was written on it that a close could lose
		}
	}()
	for svc, role := range migrations.ServiceRoles() {
		if u := cfg.ServiceDatabaseURLs[svc]; u != "" {
			urls[svc] = u
			continue
		}
		u, err := url.Parse(cfg.DatabaseURL)
		if err != nil {
			// url.Parse's error quotes the URL, password and all.
			return nil, errors.New("database URL: not a URL")
		}
		if owner == nil {
			if owner, err = pgx.Connect(ctx, cfg.DatabaseURL); err != nil {
				return nil, fmt.Errorf("connect as the schema owner to make the service roles logins: %w", err)
			}
		}
		if err := migrations.EnableLogin(ctx, owner, role, ""); err != nil {
			return nil, err
		}
		u.User = url.User(role)
		urls[svc] = u.String()
	}
	return urls, nil
}

// Launch starts bin from the stack's BinDir (or from Bins[bin]) as
// process name with env.
func (s *Stack) Launch(name, bin string, env map[string]string) error {
	if p := s.cfg.Bins[bin]; p != "" {
		return s.LaunchPath(name, p, env)
	}
	return s.LaunchPath(name, filepath.Join(s.cfg.BinDir, bin), env)
}

// LaunchPath starts the program at path (a service, or a tool such as
// redis-server) as process name with env; args may follow in env["ARGS"],
// space-separated.
func (s *Stack) LaunchPath(name, path string, env map[string]string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%s: %w (run make build)", path, err)
	}
	var args []string
	if a := env["ARGS"]; a != "" {
		args = strings.Fields(a)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}
	for k, v := range env {
		if v != "" && k != "ARGS" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	// Own process group: Ctrl-C in the terminal reaches aegis-dev only, which
	// then stops the children in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &Proc{Name: name, path: path, env: env, cmd: cmd, done: make(chan struct{})}
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); s.out.copy(stdout, "") }()
	go func() { defer pipes.Done(); s.out.copy(stderr, name+": ") }()
	go func() {
		pipes.Wait()
		p.err = cmd.Wait()
		// On the channel before done closes: whoever sees done (Start's
		// restart) finds the exit there to take back.
		select {
		case s.exited <- p:
		default:
		}
		close(p.done)
	}()
	for i, old := range s.procs {
		if old.Name == name {
			s.procs[i] = p // a relaunch takes the old one's place
			return nil
		}
	}
	s.procs = append(s.procs, p)
	return nil
}

// Relaunch starts the named process again, as it was first launched. The
// previous instance must have exited (Kill or Terminate it first).
func (s *Stack) Relaunch(name string) error { return s.RelaunchWith(name, nil) }

// RestartWith starts the named service again (its previous instance must
// have exited) with extra on top of its environment, and waits until url
// answers 200, starting it again as Start does if it exits before that.
func (s *Stack) RestartWith(ctx context.Context, name, url string, extra map[string]string) error {
	if err := s.RelaunchWith(name, extra); err != nil {
		return err
	}
	return s.waitReady(ctx, []waitFor{{name, url}})
}

// RelaunchWith starts the named process again with its first launch's
// environment and extra on top (a configuration change, such as dlq-admin
// restarted with four-eyes on). The previous instance must have exited.
func (s *Stack) RelaunchWith(name string, extra map[string]string) error {
	p := s.Proc(name)
	if p == nil {
		return fmt.Errorf("no process %s", name)
	}
	select {
	case <-p.done:
	default:
		return fmt.Errorf("%s is still running", name)
	}
	env := make(map[string]string, len(p.env)+len(extra))
	for k, v := range p.env {
		env[k] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	return s.LaunchPath(name, p.path, env)
}

// Terminate sends SIGTERM to the named process and waits up to grace for it
// to exit, then kills it.
func (s *Stack) Terminate(name string, grace time.Duration) error {
	p := s.Proc(name)
	if p == nil {
		return fmt.Errorf("no process %s", name)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("%s did not stop within %s of SIGTERM", p.Name, grace)
	}
}

// Running reports whether the named process is up.
func (s *Stack) Running(name string) bool {
	p := s.Proc(name)
	if p == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// WaitHTTP waits until url answers 200, failing early if a process exits.
func (s *Stack) WaitHTTP(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		last = err
		for _, p := range s.procs {
			select {
			case <-p.done:
				return &ExitedError{Proc: p}
			default:
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready: %w", url, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Stack) abort(err error) (*Stack, error) {
	_ = s.Stop(10 * time.Second) // err, the reason for aborting, is what the caller needs
	return nil, err
}

// Exited delivers a process that stopped on its own.
func (s *Stack) Exited() <-chan *Proc { return s.exited }

// Pid is the process id (benchmarks read its CPU time and memory from
// /proc).
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Err is the process's exit error, once it has exited.
func (p *Proc) Err() error { return p.err }

// Proc finds a process by name.
func (s *Stack) Proc(name string) *Proc {
	for _, p := range s.procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Kill sends SIGKILL to the named process (a crash) and waits for it.
func (s *Stack) Kill(name string) error {
	p := s.Proc(name)
	if p == nil {
		return fmt.Errorf("no process %s", name)
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
	return nil
}

// Stop sends SIGTERM to every process in reverse start order and waits up to
// grace for each; a process still running then is killed. It reports the
// processes that did not exit cleanly.
func (s *Stack) Stop(grace time.Duration) error {
	var errs []error
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		select {
		case <-p.done:
			continue
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
			if p.err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p.Name, p.err))
			}
		case <-time.After(grace):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
			errs = append(errs, fmt.Errorf("%s did not stop within %s of SIGTERM", p.Name, grace))
		}
	}
	return errors.Join(errs...)
}

// lineWriter interleaves whole lines from several processes.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// line writes one line of the stack's own.
func (l *lineWriter) line(text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.w, text)
}

func (l *lineWriter) copy(r io.Reader, prefix string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		l.mu.Lock()
		fmt.Fprintln(l.w, prefix+line)
		l.mu.Unlock()
	}
}
