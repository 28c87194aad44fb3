package kafkax

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/aegis-payments/aegis/pkg/config"
)

// Membership is how a consumer takes part in its group.
//
// A replica that crashes stops heartbeating, and the group coordinator waits
// SessionTimeout before it gives the replica's partitions to the others; when
// the crashed replica comes back as a new member, the rebalance that follows
// waits for the old one to time out too, and the whole group stops consuming
// meanwhile. franz-go's default (and Kafka 3's) is 45 s: a SIGKILLed worker
// then holds every payout back for most of a minute. Aegis defaults to 10 s
// (Kafka's own default before 3.0); heartbeats go every 3 s from their own
// goroutine, so a busy replica does not miss them.
//
// InstanceID turns on static membership (KIP-345): a replica restarted under
// the same id (a StatefulSet pod name, say) takes its partitions back at once
// without a rebalance. Two live replicas must never share one.
type Membership struct {
	SessionTimeout time.Duration
	InstanceID     string
}

// ReadMembership reads the consumer groups' membership settings:
//
//	KAFKA_SESSION_TIMEOUT    how long the group waits for a crashed replica before its partitions move
//	                         (6s to 30m, the broker's default bounds; franz-go's own 45s would stall the
//	                         whole group that long after a crash)
//	KAFKA_GROUP_INSTANCE_ID  a stable per-replica id (a StatefulSet pod name) turns on static membership:
//	                         a restarted replica takes its partitions back without a rebalance; two live
//	                         replicas must never share one
func ReadMembership(env *config.Env) Membership {
	m := Membership{
		SessionTimeout: env.Duration("KAFKA_SESSION_TIMEOUT", 10*time.Second),
		InstanceID:     env.String("KAFKA_GROUP_INSTANCE_ID", ""),
	}
	if m.SessionTimeout < 6*time.Second || m.SessionTimeout > 30*time.Minute {
		env.Errorf("KAFKA_SESSION_TIMEOUT must be between 6s and 30m, got %s", m.SessionTimeout)
	}
	return m
}

// Opts are the franz-go options for m.
func (m Membership) Opts() []kgo.Opt {
	var opts []kgo.Opt
	if m.SessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(m.SessionTimeout))
	}
	if m.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(m.InstanceID))
	}
	return opts
}
