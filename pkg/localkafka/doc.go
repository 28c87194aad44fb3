// Package localkafka builds the embedded Kafka every local run uses — `make
// dev`, the end-to-end and chaos suites (through aegis-kafka) and every unit
// test (through kafkatest) — so that all of them get the same broker.
//
// The broker is franz-go's kfake. It speaks the real protocol, but its
// classic-protocol group coordinator can keep a dead member forever: a member
// whose JoinGroup was parked while the group rebalanced, and whose process was
// killed before the join completed, never gets a session timer (kfake starts
// one only after it manages to send the member a reply). If the leader is
// alive it syncs, the group becomes Stable, and the dead member keeps the
// partitions the leader gave it; nobody consumes them again. Apache Kafka's
// coordinator restarts every member's session timer when a join completes, so
// there the dead member leaves the group one session timeout later.
//
// New installs a member reaper that gives kfake Apache Kafka's behaviour
// without changing kfake: control hooks observe every JoinGroup, SyncGroup,
// Heartbeat and OffsetCommit per (group, member id); a member that has not
// been heard from for its session timeout (from its JoinGroup) is removed with
// a LeaveGroup request sent on its behalf, again at the next check if that
// request fails. Members parked in a request kfake is holding (JoinGroup while
// the group prepares a rebalance, SyncGroup while it completes one) are left
// alone, as Apache Kafka leaves members awaiting join or sync alone; a
// JoinGroup counts as parked for at most the member's rebalance timeout plus
// a session. A round gets Apache Kafka's deadline, set once when it starts
// (kfake restarts its own on every JoinGroup): members that have not rejoined
// by then are removed the same way. docs/kfake.md lists this and every other
// kfake difference we know of, with the tests that prove what we do about
// each.
//
// The reaper only talks to the cluster over the wire (DescribeGroups,
// LeaveGroup), never through kfake's in-process admin calls, so a cluster
// closed under it makes its requests fail instead of blocking it.
package localkafka
