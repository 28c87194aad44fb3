package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// kafkaGroup is a consumer group as aegis-kafka's admin API shows it.
type kafkaGroup struct {
	Group      string `json:"group"`
	State      string `json:"state"`
	Generation int32  `json:"generation"`
	Members    []struct {
		MemberID   string             `json:"member_id"`
		ClientHost string             `json:"client_host"`
		Assignment map[string][]int32 `json:"assignment"`
	} `json:"members"`
}

func (g *kafkaGroup) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s generation %d:", g.State, g.Generation)
	for _, m := range g.Members {
		var parts []string
		for t, ps := range m.Assignment {
			parts = append(parts, fmt.Sprintf("%s%v", t, ps))
		}
		slices.Sort(parts)
		fmt.Fprintf(&b, " %s (%s) %s;", m.MemberID, m.ClientHost, strings.Join(parts, " "))
	}
	return b.String()
}

// groupInfo reads group from aegis-kafka's admin API at adminURL. A group
// that does not exist (yet) has no members.
func groupInfo(adminURL, group string) (*kafkaGroup, error) {
	resp, err := http.Get(adminURL + "/groups/" + group)
	if err != nil {
		return nil, fmt.Errorf("kafka group %s: %w", group, err)
	}
	defer resp.Body.Close()
	g := &kafkaGroup{Group: group}
	switch resp.StatusCode {
	case http.StatusNotFound:
		return g, nil
	case http.StatusOK:
	default:
		return nil, fmt.Errorf("kafka group %s: admin API answered %d", group, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(g); err != nil {
		return nil, fmt.Errorf("kafka group %s: %w", group, err)
	}
	return g, nil
}

// processesIn is how many processes the chaos suite runs in a consumer group
// (setUp: two workers, one dlq-admin).
func processesIn(group string) int {
	if group == "payout-worker" {
		return 2
	}
	return 1
}

// waitGroupSettled waits until group is Stable with want members; it returns
// nil then, the group as last seen once timeout passed, or ctx's error.
func waitGroupSettled(ctx context.Context, adminURL, group string, want int, timeout time.Duration) (*kafkaGroup, error) {
	deadline := time.Now().Add(timeout)
	for {
		g, err := groupInfo(adminURL, group)
		if err != nil {
			return nil, err
		}
		if g.State == "Stable" && len(g.Members) == want {
			return nil, nil
		}
		if ctx.Err() != nil {
			// The run is over, not the group's chance.
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			return g, nil
		}
		sleep(ctx, 250*time.Millisecond)
	}
}

// checkGroups: once drained, every consumer group has exactly one member per
// running process, Stable. A dead member still listed (a ghost) holds
// partitions nobody consumes; the drain may have passed only because no
// record happened to land on them.
func (su *suite) checkGroups(ctx context.Context, rep *Report) {
	ok := true
	defer func() {
		if ok {
			rep.passed("every consumer group Stable with one member per process after the drain (payout-worker 2, dlq-admin 1); no dead member kept")
		}
	}()
	for _, group := range []string{"payout-worker", "dlq-admin"} {
		want := processesIn(group)
		// A process restarted by the last fault may still be joining; a
		// dead member goes after its session timeout.
		g, err := waitGroupSettled(ctx, "http://"+su.kafka, group, want, 2*crashSessionTimeout+15*time.Second)
		switch {
		case err != nil:
			ok = false
			rep.violation("consumer group %s: %v", group, err)
		case g != nil:
			ok = false
			rep.violation("consumer group %s has %d members, want %d (one per process): %s", group, len(g.Members), want, g)
		}
	}
}
