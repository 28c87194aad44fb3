package localkafka_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/aegis-payments/aegis/pkg/localkafka"
	"github.com/aegis-payments/aegis/pkg/proctest"
)

// The test binary doubles as the consumer process the ghost tests kill: with
// helperEnv set it runs one group consumer until SIGTERM or SIGKILL.
const (
	helperEnv      = "LOCALKAFKA_TEST_CONSUMER"
	ghostTopic     = "ghosts"
	ghostGroup     = "ghost-workers"
	ghostParts     = 8
	sessionTimeout = 10 * time.Second
)

// ghostNames are the consumers killed while their JoinGroup is parked. Each
// has an even chance to become a ghost under plain kfake, so six make a
// run without one unlikely (1 in 64).
var ghostNames = []string{"g1", "g2", "g3", "g4", "g5", "g6"}

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		os.Exit(runConsumer(name))
	}
	// The parent process: its tests must leave no goroutine behind.
	goleak.VerifyTestMain(m)
}

// runConsumer is one consumer process: it commits everything it polls, the
// way the payout worker does (manual commits, BlockRebalanceOnPoll).
func runConsumer(name string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	session, err := time.ParseDuration(os.Getenv("LOCALKAFKA_TEST_SESSION"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "session:", err)
		return 2
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(os.Getenv("LOCALKAFKA_TEST_BROKERS"), ",")...),
		kgo.ClientID(name),
		kgo.ConsumerGroup(ghostGroup),
		kgo.ConsumeTopics(ghostTopic),
		kgo.SessionTimeout(session),
		kgo.RebalanceTimeout(60 * time.Second),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}
	if os.Getenv("LOCALKAFKA_TEST_BALANCER") == "eager" {
		opts = append(opts, kgo.Balancers(kgo.RangeBalancer()))
	} // else franz-go's default, cooperative-sticky, as the services use
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	defer cl.Close()
	fmt.Println("consumer started", name)
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			return 0
		}
		if fs.NumRecords() > 0 {
			if err := cl.CommitUncommittedOffsets(ctx); err != nil && ctx.Err() == nil {
				fmt.Println("commit:", err)
			}
		}
		cl.AllowRebalance()
	}
	return 0
}

type ghostWorld struct {
	t        *testing.T
	cluster  *localkafka.Cluster
	bin      string
	balancer string
	// killAtEnd SIGKILLs the consumers when the test ends: without the
	// reaper kfake may hold a live one's JoinGroup forever, so it could not
	// leave on SIGTERM.
	killAtEnd bool
}

func newGhostWorld(t *testing.T, cfg localkafka.Config, balancer string) *ghostWorld {
	t.Helper()
	c, err := localkafka.New(cfg, kfake.NumBrokers(1), kfake.SeedTopics(ghostParts, ghostTopic))
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(c.Close)
	bin, err := os.Executable()
	if err != nil {
		t.Fatalf("test binary: %v", err)
	}
	w := &ghostWorld{t: t, cluster: c, bin: bin, balancer: balancer, killAtEnd: cfg.DisableMemberExpiry}
	w.traceGroup()
	return w
}

// traceGroup logs every change of the group until the test ends: the story
// of the rebalances, for when the test fails.
func (w *ghostWorld) traceGroup() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	w.t.Cleanup(func() { cancel(); <-done })
	start := time.Now()
	go func() {
		defer close(done)
		var last string
		for ctx.Err() == nil {
			// GroupInfo blocks once the cluster is closed; the cleanup
			// above runs before the cluster's (cleanups run last in, first out).
			if d := describe(w.cluster.GroupInfo(ghostGroup)); d != last {
				last = d
				w.t.Logf("%6.2fs %s", time.Since(start).Seconds(), d)
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
}

func (w *ghostWorld) start(name string, session time.Duration) *proctest.Proc {
	w.t.Helper()
	p := proctest.Start(w.t, name, w.bin, map[string]string{
		helperEnv:                  name,
		"LOCALKAFKA_TEST_BROKERS":  strings.Join(w.cluster.ListenAddrs(), ","),
		"LOCALKAFKA_TEST_SESSION":  session.String(),
		"LOCALKAFKA_TEST_BALANCER": w.balancer,
	})
	if w.killAtEnd {
		w.t.Cleanup(p.Kill) // runs before proctest's SIGTERM
	}
	return p
}

// waitGroup waits until fn accepts the group, or fails the test with what
// the group looked like last.
func (w *ghostWorld) waitGroup(what string, timeout time.Duration, fn func(*kfake.GroupInfo) bool) *kfake.GroupInfo {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	g, err := w.cluster.WaitGroupInfo(ctx, ghostGroup, func(g *kfake.GroupInfo) bool { return g != nil && fn(g) })
	if err != nil {
		w.t.Fatalf("%s: not within %s; group: %s", what, timeout, describe(g))
	}
	return g
}

func (w *ghostWorld) waitMember(name string) {
	w.t.Helper()
	w.waitGroup(name+" in the group", 15*time.Second, func(g *kfake.GroupInfo) bool {
		return slices.Contains(clientIDs(g), name)
	})
}

// crashLoop is the incident: a live consumer "live" (the group's leader), a
// second one killed with SIGKILL, and its replacements killed the same way
// while their JoinGroup waits for the dead one's session to end. It returns
// once that round is over, with live's member id.
func (w *ghostWorld) crashLoop() string {
	w.t.Helper()
	w.start("live", sessionTimeout)
	liveID := memberID(w.waitGroup("live alone", 15*time.Second, stableWith("live")), "live")
	// c1's session is the window for the crash loop: long, so that seven
	// process starts fit in it on a loaded machine.
	c1 := w.start("c1", 2*sessionTimeout)
	before := w.waitGroup("live and c1", 30*time.Second, stableWith("live", "c1")).Epoch
	c1.Kill()
	for _, name := range ghostNames {
		p := w.start(name, sessionTimeout)
		w.waitMember(name) // its JoinGroup is parked: c1 has not timed out yet
		p.Kill()
	}
	w.start("last", sessionTimeout)
	w.waitMember("last")
	// c1's session ends; the join round completes with the ghosts counted in
	// (their JoinGroups are still parked). If live, the leader, syncs it
	// hands them partitions; with the eager balancer the group is then
	// Stable, with the cooperative one live gave partitions up, so it
	// rejoins at once for a second round. Without the reaper the rounds
	// that follow can go several ways (docs/kfake.md), so this only waits
	// for c1 to be gone and the round to be over.
	g := w.waitGroup("the round with the ghosts", 4*sessionTimeout, func(g *kfake.GroupInfo) bool {
		return !slices.Contains(clientIDs(g), "c1") && g.Epoch > before
	})
	w.t.Logf("the round with the ghosts: %s", describe(g))
	return liveID
}

func stableWith(names ...string) func(*kfake.GroupInfo) bool {
	return func(g *kfake.GroupInfo) bool {
		ids := clientIDs(g)
		slices.Sort(ids)
		want := slices.Clone(names)
		slices.Sort(want)
		return g.State == "Stable" && slices.Equal(ids, want)
	}
}

func clientIDs(g *kfake.GroupInfo) []string {
	var out []string
	if g == nil {
		return out
	}
	for _, m := range g.Members {
		out = append(out, m.ClientID)
	}
	return out
}

func describe(g *kfake.GroupInfo) string {
	if g == nil {
		return "<none>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "state %s generation %d members:", g.State, g.Epoch)
	for _, m := range g.Members {
		fmt.Fprintf(&b, " %s%v", m.ClientID, m.Assignment[ghostTopic])
	}
	return b.String()
}

// produce writes n records spread over every partition and returns the end
// offset of each partition.
func (w *ghostWorld) produce(n int) map[int32]int64 {
	w.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(w.cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		w.t.Fatalf("producer: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends := make(map[int32]int64)
	for i := range n {
		r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: ghostTopic, Value: fmt.Appendf(nil, "after-the-kills-%d", i)}).First()
		if err != nil {
			w.t.Fatalf("produce: %v", err)
		}
		if r.Offset+1 > ends[r.Partition] {
			ends[r.Partition] = r.Offset + 1
		}
	}
	if len(ends) != ghostParts {
		w.t.Fatalf("records reached %d partitions, want %d", len(ends), ghostParts)
	}
	return ends
}

// consumedUpTo reports the partitions whose committed offset is short of ends.
func consumedUpTo(g *kfake.GroupInfo, ends map[int32]int64) (behind []int32) {
	for p, end := range ends {
		if g.Commits[ghostTopic][p].Offset < end {
			behind = append(behind, p)
		}
	}
	slices.Sort(behind)
	return behind
}

// TestKilledConsumersLeaveTheGroup reproduces kfake's ghost members with real
// processes and SIGKILL, and shows that only the reaper gets rid of them, for
// an eager balancer (the ghosts stay in a Stable group) and for franz-go's
// default cooperative-sticky one (the second round waits for them).
func TestKilledConsumersLeaveTheGroup(t *testing.T) {
	proctest.Heavy(t, "kills consumer processes and waits out session timeouts")
	t.Parallel()
	for _, balancer := range []string{"eager", "cooperative"} {
		t.Run(balancer+"/with the reaper the dead members leave after their session timeout", func(t *testing.T) {
			t.Parallel()
			w := newGhostWorld(t, localkafka.Config{}, balancer)
			liveID := w.crashLoop()
			settled := time.Now()
			ends := w.produce(200)
			g := w.waitGroup("only the live members", sessionTimeout+20*time.Second, func(g *kfake.GroupInfo) bool {
				return stableWith("live", "last")(g) && g.NumAssigned() == ghostParts
			})
			t.Logf("ghosts gone %s after their round: %s", time.Since(settled).Round(time.Second), describe(g))
			w.waitGroup("every record produced after the kills consumed", 20*time.Second, func(g *kfake.GroupInfo) bool {
				return len(consumedUpTo(g, ends)) == 0
			})
			if got := memberID(w.cluster.GroupInfo(ghostGroup), "live"); got != liveID {
				t.Errorf("live was thrown out of the group on the way (member id %s, then %s)", liveID, got)
			}
			t.Logf("the reaper sent LeaveGroup for %d members (the others had a session timer thanks to its keep-alive heartbeats)", w.cluster.Expired())
		})

		t.Run(balancer+"/without the reaper kfake keeps the dead members' partitions", func(t *testing.T) {
			t.Parallel()
			w := newGhostWorld(t, localkafka.Config{DisableMemberExpiry: true}, balancer)
			w.crashLoop()
			ends := w.produce(200)
			// Apache Kafka would be done with them by now. Wall time: kfake's
			// own session timers are what this shows do not expire them.
			time.Sleep(2*sessionTimeout + 5*time.Second)
			g := w.cluster.GroupInfo(ghostGroup)
			behind := consumedUpTo(g, ends)
			if len(behind) == 0 {
				// kfake loses the answer to a dead member's JoinGroup only
				// when its select picks the closed connection over the
				// reply buffer: a coin toss per ghost (docs/kfake.md).
				t.Skipf("kfake expired all %d dead members by itself this time (%s); if this happens every run, kfake was fixed and the reaper may be retired: see docs/kfake.md",
					len(ghostNames), describe(g))
			}
			t.Logf("without the reaper, %s; partitions not consumed: %v", describe(g), behind)
		})
	}
}

// TestParkedJoinOutlivesSessionTimeout: live members whose JoinGroup waits
// longer than their own session timeout (the rebalance waits for a frozen
// member with a longer session) stay in the group: Apache Kafka keeps
// members awaiting join, kfake alone would expire them (and never answer
// their JoinGroup).
func TestParkedJoinOutlivesSessionTimeout(t *testing.T) {
	proctest.Heavy(t, "waits out session timeouts")
	t.Parallel()
	w := newGhostWorld(t, localkafka.Config{}, "cooperative")
	short, long := 6*time.Second, 20*time.Second
	w.start("patient", short)
	before := w.waitGroup("patient alone", 15*time.Second, stableWith("patient"))
	frozen := w.start("frozen", long)
	w.waitGroup("patient and frozen", 30*time.Second, stableWith("patient", "frozen"))
	if err := frozen.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP: %v", err)
	}
	defer frozen.Kill()
	// A newcomer starts a rebalance; patient's and the newcomer's joins are
	// parked until frozen's 20 s session ends, over three times their own.
	w.start("newcomer", short)
	after := w.waitGroup("frozen's session over", long+15*time.Second, func(g *kfake.GroupInfo) bool {
		return stableWith("patient", "newcomer")(g) && g.NumAssigned() == ghostParts
	})
	if memberID(before, "patient") != memberID(after, "patient") {
		t.Errorf("patient was removed while its JoinGroup was parked: member id %s, then %s",
			memberID(before, "patient"), memberID(after, "patient"))
	}
}

func memberID(g *kfake.GroupInfo, clientID string) string {
	if g == nil {
		return ""
	}
	for _, m := range g.Members {
		if m.ClientID == clientID {
			return m.MemberID
		}
	}
	return ""
}
