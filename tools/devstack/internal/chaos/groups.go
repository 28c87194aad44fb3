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

// checkGroups: once drained, every consumer group has exactly one member per
// running process, Stable. A dead member still listed (a ghost) holds
// partitions nobody consumes; the drain may have passed only because no
// record happened to land on them.
func (su *suite) checkGroups(ctx context.Context, rep *Report) {
	want := map[string]int{"payout-worker": 2, "dlq-admin": 1}
	for _, group := range []string{"payout-worker", "dlq-admin"} {
		// A process restarted by the last fault may still be joining;
		// a dead member goes after its session timeout (10 s).
		deadline := time.Now().Add(45 * time.Second)
		for {
			g, err := groupInfo("http://"+su.kafka, group)
			if err == nil && g.State == "Stable" && len(g.Members) == want[group] {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				if err != nil {
					rep.violation("consumer group %s: %v", group, err)
				} else {
					rep.violation("consumer group %s has %d members, want %d (one per process): %s", group, len(g.Members), want[group], g)
				}
				break
			}
			sleep(ctx, 500*time.Millisecond)
		}
	}
}
