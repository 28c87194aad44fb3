package bench

import (
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Open loop: every request is sent exactly once, due at its slot of the
// rate, whatever the senders' speed.
func TestOpenLoopSendsEachOnceAtItsSlot(t *testing.T) {
	const n, rate = 300, 1000.0
	var mu sync.Mutex
	seen := map[int]time.Time{}
	openLoop(context.Background(), rate, n, e2eSenders, func(it item) {
		time.Sleep(time.Millisecond) // wall time: a server slower than the slots the loop paces by the clock is the case under test
		mu.Lock()
		defer mu.Unlock()
		if _, dup := seen[it.n]; dup {
			t.Errorf("item %d sent twice", it.n)
		}
		seen[it.n] = it.due
	})
	if len(seen) != n {
		t.Fatalf("%d of %d sent", len(seen), n)
	}
	step := time.Duration(float64(time.Second) / rate)
	for i := 1; i < n; i++ {
		if d := seen[i].Sub(seen[i-1]); d != step {
			t.Fatalf("item %d due %s after the previous, want %s", i, d, step)
		}
	}
}

// A step holds only when every acknowledged item was done within the
// bound; an undone one fails it whatever the others' latency.
func TestSummarizeCountsUndoneAsOverTheBound(t *testing.T) {
	start := time.Now()
	out := []outcome{{acked: true, id: "a", due: start}, {acked: true, id: "b", due: start}, {id: "c", due: start, err: "503"}}
	done := map[string]time.Time{"a": start.Add(10 * time.Millisecond)}
	st := summarize(100, start, out, done, nil)
	if st.Acked != 2 || st.Done != 1 || st.Failures != 1 || st.FirstErr != "503" {
		t.Fatalf("summary %+v", st)
	}
	if st.ok() || st.P99 <= e2eBound {
		t.Fatalf("a step with an undone item held: %+v", st)
	}
	done["b"] = start.Add(20 * time.Millisecond)
	out = out[:2]
	if st := summarize(100, start, out, done, nil); !st.ok() {
		t.Fatalf("a step with all done in 20 ms did not hold: %+v", st)
	}
}

// A watched process that exits during the window (a database backend whose
// connection closed) counts as nothing, not as its whole life taken off the
// others': the soak's last window read -8.95 cores for Postgres.
func TestUsageMeterIgnoresAProcessThatExited(t *testing.T) {
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	// The child has spent CPU before the window begins.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if ticks, err := cpuTicks(cmd.Process.Pid); err == nil && ticks >= 5 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	m := &usageMeter{}
	m.watch("both", false, cmd.Process.Pid, os.Getpid())
	m.begin()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	u := m.end()
	if len(u) != 1 || u[0].Cores < 0 {
		t.Fatalf("usage %+v: the exited process's life was taken off", u)
	}
}

// The meter reads this process's CPU time and memory from /proc.
func TestUsageMeterReadsProc(t *testing.T) {
	m := &usageMeter{}
	m.watch("self", false, os.Getpid())
	m.begin()
	// Spin until the process has been given CPU, not for a wall time: on a
	// loaded machine 100 ms of wall time could bring less than one clock
	// tick of CPU, measured as 0 cores.
	start, err := cpuTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if now, err := cpuTicks(os.Getpid()); err == nil && now >= start+2 {
			break
		}
	}
	u := m.end()
	if len(u) != 1 || u[0].Cores <= 0 || u[0].RSSMiB <= 0 {
		t.Fatalf("usage %+v", u)
	}
}
