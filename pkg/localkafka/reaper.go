package localkafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group states as DescribeGroups names them.
const (
	statePreparing  = "PreparingRebalance"
	stateCompleting = "CompletingRebalance"
	stateStable     = "Stable"
)

// parking says which request of a member kfake may be holding unanswered.
type parking int8

const (
	parkedNowhere parking = iota
	parkedInJoin
	parkedInSync
)

type memberKey struct{ group, member string }

// member is what the reaper knows of one classic group member.
type member struct {
	sessionTimeout   time.Duration
	rebalanceTimeout time.Duration
	lastSeen         time.Time // its latest JoinGroup, SyncGroup, Heartbeat or OffsetCommit
	joinedAt         time.Time // its latest JoinGroup
	parked           parking
	// joinCompletedAt is, for a member whose latest request is a JoinGroup,
	// when the reaper learned that join round was over (another member's
	// SyncGroup, or the group seen out of PreparingRebalance). Apache Kafka
	// restarts every member's session timer there; kfake does so only for
	// members it could send the JoinGroup answer to.
	joinCompletedAt time.Time
	keptAliveAt     time.Time // the reaper's last Heartbeat on its behalf
}

// waitingInJoin reports whether kfake may still be holding m's JoinGroup at
// now: it is the member's latest request, the reaper has not learned that the
// round it waits for is over, and it is younger than the member's rebalance
// timeout plus one session. No round lasts longer in Apache Kafka, so an older
// join was answered (or its answer lost) in a round the reaper did not see
// end: the group left PreparingRebalance and came back to it between two
// checks, with no SyncGroup (the leader killed too). Without that bound the
// reaper would keep such a dead member alive with its heartbeats for good,
// and the next round would wait for it forever.
func (m *member) waitingInJoin(g *groupView, now time.Time) bool {
	return m.parked == parkedInJoin && m.joinCompletedAt.IsZero() && (g == nil || !g.settledAt.After(m.lastSeen)) &&
		now.Sub(m.joinedAt) < m.rebalanceTimeout+m.sessionTimeout
}

// groupView is what the reaper saw of a group at its last check.
type groupView struct {
	state string
	// settledAt is when the reaper last saw the group leave
	// PreparingRebalance: every join parked until then was answered.
	settledAt time.Time
	// generation is the highest generation a member named in a request:
	// what a Heartbeat on a member's behalf must carry.
	generation int32
	// lastViewAt is when the reaper last described the group.
	lastViewAt time.Time
	// roundAfter is, while the group prepares a rebalance, an instant
	// before the round began: the previous look, when the group was in
	// another state (zero: not known). A member whose latest JoinGroup is
	// older has not joined this round.
	roundAfter time.Time
	// preparingSince is, while the group prepares a rebalance, an instant
	// after the round began (the first look that saw it, or a later sign
	// of a newer round): the round's deadline runs from here.
	preparingSince time.Time
}

// saw records the group's state at a check made at now.
func (g *groupView) saw(state string, now time.Time) {
	switch {
	case state == statePreparing && g.state != statePreparing:
		g.roundAfter, g.preparingSince = g.lastViewAt, now
	case state != statePreparing:
		if g.state == statePreparing {
			g.settledAt = now
		}
		g.roundAfter, g.preparingSince = time.Time{}, time.Time{}
	}
	g.state = state
	g.lastViewAt = now
}

// roundExpired reports whether m has not joined the round g has been
// preparing for longer than rebalance, a deadline Apache Kafka sets once when
// the round starts and at which it removes every member that has not
// rejoined. kfake restarts its deadline on every JoinGroup instead, so
// members that send their JoinGroup again (franz-go does when it times out)
// keep the round waiting for good for a member that never rejoins.
func (g *groupView) roundExpired(m *member, rebalance time.Duration, now time.Time) bool {
	return g != nil && g.state == statePreparing && !g.roundAfter.IsZero() && m.joinedAt.Before(g.roundAfter) &&
		now.Sub(g.preparingSince) >= rebalance
}

// reaper removes classic group members that stopped talking to the
// coordinator, as Apache Kafka's coordinator does at session timeout.
type reaper struct {
	cl       *kgo.Client
	logger   *slog.Logger
	interval time.Duration
	now      func() time.Time
	expired  atomic.Int64

	mu      sync.Mutex
	members map[memberKey]*member
	groups  map[string]*groupView // guarded by mu: observe writes generation

	cancel context.CancelFunc
	done   chan struct{}
}

func startReaper(kc *kfake.Cluster, interval time.Duration, logger *slog.Logger, extra ...kgo.Opt) (*reaper, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(kc.ListenAddrs()...),
		kgo.ClientID("aegis-localkafka-reaper"),
		// A request that cannot be answered is retried at the next check.
		kgo.RequestRetries(1),
	}, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("reaper client: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &reaper{
		cl:       cl,
		logger:   logger,
		interval: interval,
		now:      time.Now,
		members:  make(map[memberKey]*member),
		groups:   make(map[string]*groupView),
		cancel:   cancel,
		done:     make(chan struct{}),
	}
	// Observers only: they never handle a request, so kfake (and any
	// control function a test adds later) still answers every one. They run
	// on kfake's loop, so they only touch the reaper's own map.
	for _, key := range []kmsg.Key{kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat, kmsg.OffsetCommit, kmsg.LeaveGroup} {
		kc.ControlKey(int16(key), func(req kmsg.Request) (kmsg.Response, error, bool) {
			r.observe(req)
			return nil, nil, false
		})
	}
	go r.run(ctx)
	return r, nil
}

func (r *reaper) stop() {
	r.cancel()
	<-r.done
	r.cl.Close()
}

// observe records that a member spoke. Only a JoinGroup that names its member
// id starts tracking: a first JoinGroup (no id yet) is kfake's pending member,
// which kfake expires correctly on its own.
func (r *reaper) observe(req kmsg.Request) {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch q := req.(type) {
	case *kmsg.JoinGroupRequest:
		if q.MemberID == "" {
			return
		}
		session := time.Duration(q.SessionTimeoutMillis) * time.Millisecond
		rebalance := time.Duration(q.RebalanceTimeoutMillis) * time.Millisecond
		if rebalance <= 0 {
			rebalance = session // JoinGroup v0 has none: Apache Kafka uses the session timeout
		}
		r.members[memberKey{q.Group, q.MemberID}] = &member{
			sessionTimeout:   session,
			rebalanceTimeout: rebalance,
			lastSeen:         now,
			joinedAt:         now,
			parked:           parkedInJoin,
		}
	case *kmsg.SyncGroupRequest:
		r.sawGeneration(q.Group, q.Generation, now)
		// A SyncGroup means the join round is over: every member still
		// parked in JoinGroup was answered (or its answer was lost).
		for k, m := range r.members {
			if k.group == q.Group && m.parked == parkedInJoin && m.joinCompletedAt.IsZero() {
				m.joinCompletedAt = now
			}
		}
		r.seen(q.Group, q.MemberID, now, parkedInSync)
	case *kmsg.HeartbeatRequest:
		if isKeepAlive(q) {
			return
		}
		r.sawGeneration(q.Group, q.Generation, now)
		// franz-go heartbeats only between a completed sync and its next
		// join, so a heartbeating member is parked nowhere.
		r.seen(q.Group, q.MemberID, now, parkedNowhere)
	case *kmsg.OffsetCommitRequest:
		// A commit may overlap a parked join; it proves life but does not
		// say where the member is.
		if m := r.members[memberKey{q.Group, q.MemberID}]; m != nil {
			m.lastSeen = now
			r.sawGeneration(q.Group, q.Generation, now)
		}
	case *kmsg.LeaveGroupRequest:
		delete(r.members, memberKey{q.Group, q.MemberID})
		for _, lm := range q.Members {
			delete(r.members, memberKey{q.Group, lm.MemberID})
		}
	}
}

func (r *reaper) sawGeneration(group string, gen int32, now time.Time) {
	g := r.groups[group]
	if g == nil {
		g = &groupView{}
		r.groups[group] = g
	}
	if gen > g.generation && g.state == statePreparing {
		// A round ended since the reaper saw this one begin; a round
		// being prepared now began later: its deadline runs from now.
		g.preparingSince = now
	}
	g.generation = max(g.generation, gen)
}

func (r *reaper) seen(group, memberID string, now time.Time, p parking) {
	m := r.members[memberKey{group, memberID}]
	if m == nil {
		return
	}
	m.lastSeen = now
	m.parked = p
	m.joinCompletedAt = time.Time{}
}

// expiredFor reports whether m, in a group in state, has been silent for its
// session timeout, and for how long it has been silent. A member parked in a
// request kfake is holding is never expired here: Apache Kafka keeps members
// awaiting join or sync too, and kfake's rebalance timeout (for joins) and
// pending-sync timeout (for syncs) remove the ones that never come back.
func expiredFor(state string, g *groupView, m *member, now time.Time) (bool, time.Duration) {
	switch {
	case state == statePreparing && m.waitingInJoin(g, now),
		state == stateCompleting && m.parked == parkedInSync:
		return false, 0
	case state != statePreparing && state != stateCompleting && state != stateStable:
		return false, 0
	}
	since := m.lastSeen
	if m.parked == parkedInJoin && !m.waitingInJoin(g, now) {
		// Its join was answered when the round ended; the session runs
		// from there, as in Apache Kafka.
		if m.joinCompletedAt.After(since) {
			since = m.joinCompletedAt
		}
		if g != nil && g.settledAt.After(since) {
			since = g.settledAt
		}
	}
	idle := now.Sub(since)
	return idle >= m.sessionTimeout, idle
}

func (r *reaper) run(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.check(ctx)
		}
	}
}

type reapable struct {
	key        memberKey
	idle       time.Duration
	m          member
	state      string
	generation int32
	// why is the reason the LeaveGroup gives and the log line says.
	why string
}

// check describes every group with tracked members, forgets members the
// coordinator no longer has, and removes the expired ones.
func (r *reaper) check(ctx context.Context) {
	r.mu.Lock()
	var groups []string
	seenGroup := make(map[string]bool)
	for k := range r.members {
		if !seenGroup[k.group] {
			seenGroup[k.group] = true
			groups = append(groups, k.group)
		}
	}
	r.mu.Unlock()
	if len(groups) == 0 {
		return
	}

	sentAt := r.now()
	dctx, cancel := context.WithTimeout(ctx, 4*r.interval+time.Second)
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = groups
	resp, err := req.RequestWith(dctx, r.cl)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			r.logger.Debug("localkafka reaper: describe groups", "error", err.Error())
		}
		return
	}

	now := r.now()
	var victims, parked []reapable
	r.mu.Lock()
	for _, dg := range resp.Groups {
		if kerr.ErrorForCode(dg.ErrorCode) != nil {
			continue
		}
		gv := r.groups[dg.Group]
		if gv == nil {
			gv = &groupView{}
			r.groups[dg.Group] = gv
		}
		gv.saw(dg.State, now)
		present := make(map[string]bool, len(dg.Members))
		for _, dm := range dg.Members {
			present[dm.MemberID] = true
		}
		// The round's deadline is the longest rebalance timeout of its
		// members, as in Apache Kafka.
		var rebalance time.Duration
		for k, m := range r.members {
			if k.group == dg.Group && present[k.member] {
				rebalance = max(rebalance, m.rebalanceTimeout)
			}
		}
		for k, m := range r.members {
			if k.group != dg.Group {
				continue
			}
			if !present[k.member] {
				// Gone from the coordinator (left, expired, fenced),
				// unless it joined after we asked.
				if m.lastSeen.Before(sentAt) {
					delete(r.members, k)
				}
				continue
			}
			if ok, idle := expiredFor(dg.State, gv, m, now); ok {
				victims = append(victims, reapable{key: k, idle: idle, m: *m, state: dg.State, generation: gv.generation,
					why: "no heartbeat within its session timeout"})
				continue
			}
			if gv.roundExpired(m, rebalance, now) {
				victims = append(victims, reapable{key: k, idle: now.Sub(m.joinedAt), m: *m, state: dg.State, generation: gv.generation,
					why: "not rejoined within the round's rebalance timeout"})
				continue
			}
			if dg.State == statePreparing && m.waitingInJoin(gv, now) && now.Sub(maxTime(m.lastSeen, m.keptAliveAt)) >= m.sessionTimeout/3 {
				m.keptAliveAt = now
				parked = append(parked, reapable{key: k, m: *m, state: dg.State, generation: gv.generation})
			}
		}
	}
	r.mu.Unlock()

	for _, v := range victims {
		r.remove(ctx, v)
	}
	for _, p := range parked {
		r.keepAlive(ctx, p)
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// keepAliveTag marks the reaper's own Heartbeats (a tagged field kfake
// ignores), so that observe does not take them for the member's.
const keepAliveTag uint32 = 0x41454753

func isKeepAlive(q *kmsg.HeartbeatRequest) bool {
	var mine bool
	q.UnknownTags.Each(func(key uint32, _ []byte) { mine = mine || key == keepAliveTag })
	return mine
}

// keepAlive heartbeats for a member whose JoinGroup kfake is holding while
// the group prepares a rebalance. Apache Kafka counts a member awaiting join
// as alive until the rebalance timeout; kfake keeps running its session timer
// and removes it without ever answering the JoinGroup, so a live consumer
// waiting for a slow (or dead) peer would be thrown out and hang. kfake's
// rebalance timeout still bounds how long a dead joiner is kept.
func (r *reaper) keepAlive(ctx context.Context, p reapable) {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group = p.key.group
	req.MemberID = p.key.member
	req.Generation = p.generation
	req.UnknownTags.Set(keepAliveTag, []byte("aegis-localkafka"))
	hctx, cancel := context.WithTimeout(ctx, 4*r.interval+time.Second)
	defer cancel()
	resp, err := req.RequestWith(hctx, r.cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	// REBALANCE_IN_PROGRESS is the answer that refreshed the session.
	if err != nil && !errors.Is(err, kerr.RebalanceInProgress) && ctx.Err() == nil {
		r.logger.Debug("localkafka reaper: keep-alive heartbeat", "group", p.key.group, "member_id", p.key.member, "error", err.Error())
	}
}

// remove sends the LeaveGroup a dead member never sent.
func (r *reaper) remove(ctx context.Context, v reapable) {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Group = v.key.group
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID = v.key.member
	lm.Reason = kmsg.StringPtr(fmt.Sprintf("aegis localkafka: %s (silent for %s, session timeout %s, rebalance timeout %s)",
		v.why, v.idle.Round(time.Millisecond), v.m.sessionTimeout, v.m.rebalanceTimeout))
	req.Members = append(req.Members, lm)
	lctx, cancel := context.WithTimeout(ctx, 4*r.interval+time.Second)
	resp, err := req.RequestWith(lctx, r.cl)
	cancel()
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err == nil && len(resp.Members) > 0 {
		err = kerr.ErrorForCode(resp.Members[0].ErrorCode)
	}
	switch {
	case err == nil:
		r.expired.Add(1)
		r.logger.Warn("kafka group member expired: "+v.why,
			"group", v.key.group, "member_id", v.key.member, "silent_for", v.idle.Round(time.Millisecond).String(),
			"session_timeout", v.m.sessionTimeout.String(), "rebalance_timeout", v.m.rebalanceTimeout.String(), "group_state", v.state)
	case errors.Is(err, kerr.UnknownMemberID):
		// It went by itself meanwhile.
	default:
		// Anything else (a timeout on a loaded machine, a closed
		// connection, a retriable code) is tried again at the next
		// check: forgetting the member here would leave a dead one in the
		// group for good.
		if ctx.Err() == nil {
			r.logger.Warn("localkafka reaper: leave group failed; trying again at the next check", "group", v.key.group,
				"member_id", v.key.member, "error", err.Error())
		}
		return
	}
	r.mu.Lock()
	if m := r.members[v.key]; m != nil && !m.lastSeen.After(v.m.lastSeen) {
		delete(r.members, v.key)
	}
	r.mu.Unlock()
}
