package localkafka

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeReaper is a reaper whose clock the test moves; only its bookkeeping is
// used (observe and expiredFor), no cluster.
func fakeReaper(now *time.Time) *reaper {
	return &reaper{
		now:     func() time.Time { return *now },
		members: make(map[memberKey]*member),
		groups:  make(map[string]*groupView),
	}
}

// rebalanceTimeout is every member's here, the services' own.
const rebalanceTimeout = 2 * time.Minute

func join(group, memberID string, session time.Duration) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Group, r.MemberID, r.SessionTimeoutMillis = group, memberID, int32(session.Milliseconds())
	r.RebalanceTimeoutMillis = int32(rebalanceTimeout.Milliseconds())
	return r
}

func syncReq(group, memberID string, gen int32) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Group, r.MemberID, r.Generation = group, memberID, gen
	return r
}

func heartbeat(group, memberID string, gen int32) *kmsg.HeartbeatRequest {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Group, r.MemberID, r.Generation = group, memberID, gen
	return r
}

// TestExpiry walks a reaper's bookkeeping through the request sequences
// that left ghost members in kfake (docs/kfake.md) and checks when each member counts as expired.
func TestExpiry(t *testing.T) {
	t.Parallel()
	const session = 10 * time.Second
	type step struct {
		after time.Duration // clock moves by this first
		req   kmsg.Request  // observed (may be nil)
		state string        // then the group is seen in this state (may be "")
	}
	cases := []struct {
		name    string
		steps   []step
		state   string        // state at the final check
		after   time.Duration // clock moves by this before the final check
		expired bool
	}{
		{
			name:  "a member heartbeating in a Stable group is kept",
			steps: []step{{0, join("g", "m", session), ""}, {time.Second, syncReq("g", "m", 1), stateStable}, {5 * time.Second, heartbeat("g", "m", 1), stateStable}},
			state: stateStable, after: session - time.Millisecond, expired: false,
		},
		{
			name:  "a member silent for its session in a Stable group is expired",
			steps: []step{{0, join("g", "m", session), ""}, {time.Second, syncReq("g", "m", 1), stateStable}, {5 * time.Second, heartbeat("g", "m", 1), stateStable}},
			state: stateStable, after: session, expired: true,
		},
		{
			name:  "a member waiting in JoinGroup while the group prepares is kept past its session",
			steps: []step{{0, join("g", "m", session), statePreparing}},
			state: statePreparing, after: 3 * session, expired: false,
		},
		{
			name: "a ghost's session runs from the end of its round, not from its JoinGroup",
			steps: []step{
				{0, join("g", "ghost", session), statePreparing},
				{25 * time.Second, nil, stateStable}, // the round ends 25 s later; the ghost never syncs
			},
			state: stateStable, after: session - time.Millisecond, expired: false,
		},
		{
			name: "a ghost in a Stable group is expired one session after its round",
			steps: []step{
				{0, join("g", "ghost", session), statePreparing},
				{25 * time.Second, nil, stateStable},
			},
			state: stateStable, after: session, expired: true,
		},
		{
			name: "a ghost is expired in the next PreparingRebalance too once the leader synced",
			steps: []step{
				{0, join("g", "ghost", session), statePreparing},
				{0, join("g", "leader", session), statePreparing},
				{2 * time.Second, syncReq("g", "leader", 1), ""}, // the round ended; the ghost's answer was lost
				{0, nil, statePreparing},                         // the cooperative second round
			},
			state: statePreparing, after: session, expired: true,
		},
		{
			name:  "a member waiting in JoinGroup is kept up to its rebalance timeout plus a session",
			steps: []step{{0, join("g", "m", session), statePreparing}},
			state: statePreparing, after: rebalanceTimeout + session - time.Millisecond, expired: false,
		},
		{
			// The round it joined ended unseen (the group left
			// PreparingRebalance and came back between two checks, no
			// SyncGroup: the leader was killed too). Kept alive for good,
			// it held every later round: the chaos run whose payout-worker
			// group never re-formed.
			name:  "a dead member taken for parked in JoinGroup is expired past its rebalance timeout plus a session",
			steps: []step{{0, join("g", "m", session), statePreparing}},
			state: statePreparing, after: rebalanceTimeout + session, expired: true,
		},
		{
			name:  "a member waiting in SyncGroup while the group completes is kept",
			steps: []step{{0, join("g", "m", session), statePreparing}, {time.Second, syncReq("g", "m", 1), stateCompleting}},
			state: stateCompleting, after: 3 * session, expired: false,
		},
		{
			name:  "a member that stopped heartbeating is expired while the group prepares",
			steps: []step{{0, join("g", "m", session), ""}, {time.Second, syncReq("g", "m", 1), stateStable}, {time.Second, heartbeat("g", "m", 1), statePreparing}},
			state: statePreparing, after: session, expired: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			now := time.Unix(1_700_000_000, 0)
			r := fakeReaper(&now)
			g := &groupView{}
			see := func(state string) {
				if state != "" {
					g.saw(state, now)
				}
			}
			for _, s := range tc.steps {
				now = now.Add(s.after)
				if s.req != nil {
					r.observe(s.req)
				}
				see(s.state)
			}
			now = now.Add(tc.after)
			see(tc.state)
			var m *member
			for k, v := range r.members {
				if k.member == "m" || k.member == "ghost" {
					m = v
				}
			}
			if m == nil {
				t.Fatal("member not tracked")
			}
			if got, idle := expiredFor(tc.state, g, m, now); got != tc.expired {
				t.Errorf("expired = %v after %s silent, want %v", got, idle, tc.expired)
			}
		})
	}
}

// TestRoundDeadline: a member that has not joined a round is due for removal
// once the round has been prepared for the rebalance timeout, counted from
// the first look that saw it (Apache Kafka's deadline, which kfake moves on
// every JoinGroup); one that joined the round, or a round whose start the
// reaper cannot place, is not.
func TestRoundDeadline(t *testing.T) {
	t.Parallel()
	const session = 10 * time.Second
	t0 := time.Unix(1_700_000_000, 0)
	now := t0
	r := fakeReaper(&now)
	r.observe(join("g", "silent", session))
	r.observe(join("g", "m", session))
	g := &groupView{}
	g.saw(statePreparing, now) // the group forming: its start is not known
	now = now.Add(time.Second)
	g.saw(stateStable, now)
	now = now.Add(time.Second)
	g.saw(stateStable, now)
	lastStable := now
	now = now.Add(time.Second)
	r.observe(join("g", "m", session)) // m rejoins: a new round
	g.saw(statePreparing, now)
	if !g.roundAfter.Equal(lastStable) {
		t.Fatalf("roundAfter = %v, want the last look before the round (%v)", g.roundAfter, lastStable)
	}
	silent, m := r.members[memberKey{"g", "silent"}], r.members[memberKey{"g", "m"}]
	at := g.preparingSince.Add(rebalanceTimeout - time.Millisecond)
	if g.roundExpired(silent, rebalanceTimeout, at) {
		t.Errorf("silent removed before the round's deadline")
	}
	at = g.preparingSince.Add(rebalanceTimeout)
	if !g.roundExpired(silent, rebalanceTimeout, at) {
		t.Errorf("silent, which never joined the round, kept past its deadline")
	}
	if g.roundExpired(m, rebalanceTimeout, at) {
		t.Errorf("m, which joined the round, removed at its deadline")
	}

	// A member names a newer generation: a round ended unseen, the one
	// being prepared began later, and its deadline runs from then.
	now = now.Add(time.Minute)
	r.groups["g"] = g
	r.observe(heartbeat("g", "m", 7))
	if !g.preparingSince.Equal(now) {
		t.Errorf("preparingSince = %v after a newer generation at %v", g.preparingSince, now)
	}

	fresh := &groupView{}
	fresh.saw(statePreparing, t0)
	if fresh.roundExpired(silent, rebalanceTimeout, t0.Add(time.Hour)) {
		t.Errorf("a round whose start is not known has no deadline here")
	}
}

func TestObserveBookkeeping(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	r := fakeReaper(&now)

	r.observe(join("g", "", 10*time.Second))
	if len(r.members) != 0 {
		t.Fatalf("a JoinGroup without a member id is kfake's pending member, not ours: tracked %v", r.members)
	}

	v0 := join("g", "m", 10*time.Second)
	v0.RebalanceTimeoutMillis = -1
	r.observe(v0)
	if m := r.members[memberKey{"g", "m"}]; m == nil || m.rebalanceTimeout != 10*time.Second {
		t.Fatalf("a JoinGroup without a rebalance timeout (v0) waits for its session timeout: %+v", m)
	}

	r.observe(join("g", "m", 10*time.Second))
	m := r.members[memberKey{"g", "m"}]
	if m == nil || m.sessionTimeout != 10*time.Second || m.rebalanceTimeout != rebalanceTimeout || m.parked != parkedInJoin {
		t.Fatalf("after JoinGroup: %+v", m)
	}

	now = now.Add(time.Second)
	ka := heartbeat("g", "m", 3)
	ka.UnknownTags.Set(keepAliveTag, []byte("aegis-localkafka"))
	r.observe(ka)
	if m.parked != parkedInJoin || !m.lastSeen.Equal(now.Add(-time.Second)) {
		t.Errorf("the reaper's own keep-alive counted as the member's: %+v", m)
	}

	r.observe(heartbeat("g", "m", 3))
	if m.parked != parkedNowhere || !m.lastSeen.Equal(now) {
		t.Errorf("after its Heartbeat: %+v", m)
	}
	if got := r.groups["g"].generation; got != 3 {
		t.Errorf("generation = %d, want 3", got)
	}

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = "g"
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
	r.observe(leave)
	if len(r.members) != 0 {
		t.Errorf("a member that left is still tracked: %v", r.members)
	}
}
