package watch

import (
	"context"
	"reflect"
	"time"
)

// Task is one watcher's work.
type Task struct {
	// Every is the interval between runs; it must be positive.
	Every time.Duration
	// Wake, when not nil, runs the task at once whenever it receives.
	Wake <-chan struct{}
	// Do is one run.
	Do func(context.Context) error
	// Failed is told of a run's error, not of one cut short because ctx
	// ended; nil ignores errors.
	Failed func(error)
}

// Run runs tasks, each at once (in the order given) and then on its
// interval and its wake, until ctx ends; it then returns nil.
func Run(ctx context.Context, tasks ...Task) error {
	// cases[0] is ctx.Done(); then each task's ticker and, if any, its
	// wake. owner[i] is the task of cases[i].
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())}}
	owner := []int{-1}
	for i, t := range tasks {
		tick := time.NewTicker(t.Every)
		defer tick.Stop()
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(tick.C)})
		owner = append(owner, i)
		if t.Wake != nil {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.Wake)})
			owner = append(owner, i)
		}
	}
	for _, t := range tasks {
		run(ctx, t)
	}
	for {
		chosen, _, _ := reflect.Select(cases)
		if chosen == 0 {
			return nil
		}
		run(ctx, tasks[owner[chosen]])
	}
}

func run(ctx context.Context, t Task) {
	if err := t.Do(ctx); err != nil && ctx.Err() == nil && t.Failed != nil {
		t.Failed(err)
	}
}
