package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Component is anything that runs in the background between Start and Stop.
//
// Start backgrounds the component and returns; a second Start does nothing.
// The context's values are kept but not its cancellation: only Stop stops a
// component, so that a service stops its parts in order.
//
// Stop asks the component to finish its in-flight work and take no more
// (soft stop); if ctx is done first, it cancels that work (hard stop). It
// returns once every goroutine of the component has returned. A second Stop
// and a Stop before Start are harmless.
type Component interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Failer is a component that can fail on its own while running (a consumer
// whose client is closed, a listener that cannot bind): Run stops the
// service when Failed is closed and returns Err.
type Failer interface {
	Failed() <-chan struct{}
	Err() error
}

// ErrHardStop is the cause of the hard context when Stop's context ran out
// before the component finished its in-flight work.
var ErrHardStop = errors.New("lifecycle: stop deadline passed, in-flight work cancelled")

// Routine is one goroutine of a component. soft is done when the component
// is asked to stop: take no new work, finish what is in flight, return.
// hard is done when the stop deadline passed: abandon in-flight work (use
// hard, never context.Background, for I/O that must not outlive the stop).
// soft is derived from hard, so it is done by then too.
type Routine func(soft, hard context.Context) error

// Base implements Component for a type that embeds it and starts its
// goroutines with Base.Start. Its zero value is ready to use.
type Base struct {
	mu       sync.Mutex
	started  bool
	stopped  bool // Stop was called (soft stop signalled)
	soft     context.CancelFunc
	hard     context.CancelCauseFunc
	softCtx  context.Context
	done     chan struct{}
	failed   chan struct{}
	failOnce sync.Once
	err      error
	// lateErr is a routine's error returned after Stop was called: Stop
	// returns it (Run already stopped waiting for failures).
	lateErr error
}

// Start runs each routine in a goroutine of its own. It does nothing when
// the component was started or stopped already, or when no routine is given.
func (b *Base) Start(ctx context.Context, routines ...Routine) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started || b.stopped {
		return nil
	}
	b.init()
	b.started = true
	hard, hardCancel := context.WithCancelCause(context.WithoutCancel(ctx))
	soft, softCancel := context.WithCancel(hard)
	b.hard, b.soft, b.softCtx = hardCancel, softCancel, soft
	var wg sync.WaitGroup
	for _, r := range routines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r(soft, hard); err != nil {
				b.fail(err)
			}
		}()
	}
	go func() {
		wg.Wait()
		close(b.done)
	}()
	return nil
}

func (b *Base) init() {
	if b.done == nil {
		b.done = make(chan struct{})
		b.failed = make(chan struct{})
	}
}

func (b *Base) fail(err error) {
	b.failOnce.Do(func() {
		b.mu.Lock()
		b.err = err
		if b.stopped {
			b.lateErr = err
		}
		b.mu.Unlock()
		close(b.failed)
	})
}

// Stop stops the routines: soft first, hard when ctx is done. It returns
// after all of them returned; its error says the stop was hard.
func (b *Base) Stop(ctx context.Context) error {
	b.mu.Lock()
	if !b.started {
		b.mu.Unlock()
		return nil
	}
	b.stopped = true
	soft, hard, done := b.soft, b.hard, b.done
	b.mu.Unlock()
	soft()
	select {
	case <-done:
		return b.late()
	case <-ctx.Done():
	}
	hard(ErrHardStop)
	<-done
	return errors.Join(fmt.Errorf("%w (%w)", ErrHardStop, context.Cause(ctx)), b.late())
}

func (b *Base) late() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lateErr
}

// Stopping is done once Stop was called (nil context before Start: use it
// only after Start). A component's methods called from outside, such as a
// Save, check it to refuse new work.
func (b *Base) Stopping() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.softCtx == nil {
		return nil
	}
	return b.softCtx.Done()
}

// Done is closed when every routine returned (never before Start).
func (b *Base) Done() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	return b.done
}

// Failed is closed when a routine returned an error.
func (b *Base) Failed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.init()
	return b.failed
}

// Err is the first error a routine returned.
func (b *Base) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// Loop is a component running fn in one goroutine, for the run loops shaped
// `Run(ctx) error` that finish their current work and return when ctx is
// done: fn's ctx is the soft one. A nil return before Stop is not a failure
// (a loop with nothing to do may return at once); an error is. A Loop has
// no second signal: fn must bound its own wind-down (httpserver.Run and the
// consumers do, with SHUTDOWN_GRACE); a component whose in-flight work must
// be cancelled at the deadline embeds Base and uses the hard context.
type Loop struct {
	Base
	name string
	fn   func(ctx context.Context) error
}

// Func returns fn as a Loop named name (the name is in its errors).
func Func(name string, fn func(ctx context.Context) error) *Loop {
	return &Loop{name: name, fn: fn}
}

// Start runs fn.
func (l *Loop) Start(ctx context.Context) error {
	return l.Base.Start(ctx, func(soft, _ context.Context) error {
		if err := l.fn(soft); err != nil {
			return fmt.Errorf("%s: %w", l.name, err)
		}
		return nil
	})
}

// Hook is a component that only acts on Stop: closing a client, leaving a
// consumer group, flushing a producer. It runs once, on the first Stop after
// Start, with Stop's context.
type Hook struct {
	name    string
	fn      func(ctx context.Context) error
	mu      sync.Mutex
	started bool
	ran     bool
}

// OnStop returns a Hook running fn at Stop.
func OnStop(name string, fn func(ctx context.Context) error) *Hook {
	return &Hook{name: name, fn: fn}
}

// Start arms the hook.
func (h *Hook) Start(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.started = true
	return nil
}

// Stop runs the hook the first time.
func (h *Hook) Stop(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.started || h.ran {
		return nil
	}
	h.ran = true
	if err := h.fn(ctx); err != nil {
		return fmt.Errorf("%s: %w", h.name, err)
	}
	return nil
}

// Stage is a set of components stopped together, in parallel.
type Stage struct {
	Name       string
	Components []Component
}

// Run starts the stages, last first (so that what takes new work, in the
// first stage, starts after what it hands work to), and waits until ctx is
// done or a component fails. It then stops the stages in order, all within
// grace: each stage is soft-stopped, and hard-stopped when grace has run
// out. It returns the failure that stopped the service, if any, joined with
// the errors of the stop.
func Run(ctx context.Context, logger *slog.Logger, grace time.Duration, stages ...Stage) error {
	var started []Stage
	var err error
	for i := len(stages) - 1; i >= 0 && err == nil; i-- {
		st := Stage{Name: stages[i].Name}
		for _, c := range stages[i].Components {
			if err = c.Start(ctx); err != nil {
				err = fmt.Errorf("start %s: %w", stages[i].Name, err)
				break
			}
			st.Components = append(st.Components, c)
		}
		started = append([]Stage{st}, started...)
	}
	if err == nil {
		err = wait(ctx, stages)
	}
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	began := time.Now()
	for _, st := range started {
		if serr := stopStage(stopCtx, st); serr != nil {
			err = errors.Join(err, fmt.Errorf("stop %s: %w", st.Name, serr))
		}
		logger.Debug("stage stopped", "stage", st.Name, "elapsed", time.Since(began).String())
	}
	return err
}

// wait blocks until ctx is done or a component fails.
func wait(ctx context.Context, stages []Stage) error {
	failed := make(chan error, 1)
	var wg sync.WaitGroup
	defer wg.Wait() // after cancel, below: the watchers return on it
	waitCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, st := range stages {
		for _, c := range st.Components {
			f, ok := c.(Failer)
			if !ok {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-f.Failed():
					select {
					case failed <- f.Err():
					default:
					}
				case <-waitCtx.Done():
				}
			}()
		}
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-failed:
		return err
	}
}

func stopStage(ctx context.Context, st Stage) error {
	errs := make([]error, len(st.Components))
	var wg sync.WaitGroup
	for i, c := range st.Components {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Stop(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
