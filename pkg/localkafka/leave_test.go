package localkafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestReaperSendsLeaveGroup drives the reaper's LeaveGroup path alone: the
// reaper is told a member's session is 1 s while the member (and kfake) use
// 30 s and heartbeat every 3 s, so only the reaper can remove it, between two
// heartbeats. The member learns it on its next heartbeat and joins again
// under a new member id.
func TestReaperSendsLeaveGroup(t *testing.T) {
	t.Parallel()
	c, err := New(Config{CheckInterval: 50 * time.Millisecond}, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"),
		kgo.SessionTimeout(30*time.Second), kgo.HeartbeatInterval(3*time.Second))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx)
		}
	}()
	first, err := c.WaitGroupStable(ctx, "g", 1)
	if err != nil {
		t.Fatalf("group not stable: %v", err)
	}
	id := first.Members[0].MemberID

	c.reaper.mu.Lock()
	m := c.reaper.members[memberKey{"g", id}]
	if m == nil {
		c.reaper.mu.Unlock()
		t.Fatalf("reaper does not track member %s", id)
	}
	m.sessionTimeout = time.Second
	c.reaper.mu.Unlock()

	again, err := c.WaitGroupInfo(ctx, "g", func(g *kfake.GroupInfo) bool {
		return g != nil && g.State == "Stable" && len(g.Members) == 1 && g.Members[0].MemberID != id
	})
	if err != nil {
		t.Fatalf("member %s was not removed and back: %v (group %+v)", id, err, again)
	}
	if got := c.Expired(); got < 1 {
		t.Errorf("Expired() = %d, want at least 1", got)
	}
}
