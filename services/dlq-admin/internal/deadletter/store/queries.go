package store

import (
	"fmt"
	"strconv"
	"strings"
)

// summaryColumns are scanned by scanSummary, in this order. The payload itself
// is not read for lists: only its size.
const summaryColumns = `
    id, source, original_topic, original_partition, original_offset,
    coalesce(consumer_group, ''), outbox_id, partition_key, event_type,
    error, error_class, retry_count, first_failure_at, failed_at, correlation_id,
    status, replay_count, replay_outbox_id, resolved_by, resolved_at,
    resolution_reason, created_at, octet_length(payload),
    subject, replay_outcome, replay_subject_state`

// query renders a statement whose WHERE clause holds only the filters a
// request sets: every filter is then a plain equality or range the planner
// can serve from its index (dead_letters_list_idx for id order, the
// per-filter indexes of migration 000009), which one static statement with
// "no filter when the parameter is empty" conditions would not be under a
// generic plan.
type query struct {
	conds []string
	args  []any
}

// add appends cond, whose %s is the placeholder of v.
func (q *query) add(cond string, v any) {
	q.args = append(q.args, v)
	q.conds = append(q.conds, fmt.Sprintf(cond, "$"+strconv.Itoa(len(q.args))))
}

// arg adds v as a parameter and returns its placeholder.
func (q *query) arg(v any) string {
	q.args = append(q.args, v)
	return "$" + strconv.Itoa(len(q.args))
}

func (q *query) where() string {
	if len(q.conds) == 0 {
		return "TRUE"
	}
	return strings.Join(q.conds, "\n  AND ")
}

// match adds m's filters.
func (q *query) match(m Match) {
	if m.Topic != "" {
		q.add("original_topic = %s", m.Topic)
	}
	if m.Status != "" {
		q.add("status = %s", m.Status)
	}
	if m.ErrorClass != "" {
		q.add("error_class = %s", m.ErrorClass)
	}
	if !m.Since.IsZero() {
		q.add("failed_at >= %s", m.Since)
	}
	if !m.Until.IsZero() {
		q.add("failed_at < %s", m.Until)
	}
	if m.PayoutID != "" {
		// The first condition is dead_letters_payout_idx's predicate.
		q.add("subject ? 'payout_id' AND subject->>'payout_id' = %s", m.PayoutID)
	}
	if m.User != "" {
		q.add("partition_key = %s", m.User)
	}
	if m.CorrelationID != "" {
		q.add("correlation_id = %s", m.CorrelationID)
	}
	if m.EventType != "" {
		q.add("event_type = %s", m.EventType)
	}
}

// listQuery is a page of letters matching f: id below the cursor (MaxInt64
// on the first page), newest first, limit rows.
func listQuery(m Match, below int64, limit int) (string, []any) {
	var q query
	q.add("id < %s", below)
	q.match(m)
	lim := q.arg(limit)
	return `
SELECT ` + summaryColumns + `
FROM dead_letters
WHERE ` + q.where() + `
ORDER BY id DESC
LIMIT ` + lim, q.args
}

// errorGroup is the normalised error message letters are grouped by: ids
// (UUIDs, then any run of digits, with the letters and underscores glued to
// it: po_1Abc9, evt_123) become placeholders, so that "payout 3f2a…
// failed: account_invalid" of eight payouts is one group.
const errorGroup = `regexp_replace(regexp_replace(regexp_replace(left(error, 1000),
    '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}', '<id>', 'gi'),
    '[A-Za-z_]*[0-9][A-Za-z0-9_]*', '<n>', 'g'),
    '\s+', ' ', 'g')`

// groupsQuery groups the letters matching m by error class and normalised
// message, biggest group first; sample_id is the group's newest letter.
func groupsQuery(m Match, limit int) (string, []any) {
	var q query
	q.match(m)
	lim := q.arg(limit)
	return `
SELECT error_class, ` + errorGroup + ` AS message, count(*), min(failed_at), max(failed_at), max(id),
       (array_agg(error ORDER BY id DESC))[1], array_agg(DISTINCT original_topic ORDER BY original_topic)
FROM dead_letters
WHERE ` + q.where() + `
GROUP BY 1, 2
ORDER BY 3 DESC, 6 DESC
LIMIT ` + lim, q.args
}

const sqlGet = `
SELECT ` + summaryColumns + `, payload, headers, retry_history
FROM dead_letters
WHERE id = $1`

// sqlLock reads one letter, whole, and locks it for the rest of the
// transaction: replay and discard decide on its status under this lock, so
// two operators (or a bulk job and an operator) cannot both resolve it.
const sqlLock = `
SELECT ` + summaryColumns + `, payload, headers, retry_history
FROM dead_letters
WHERE id = $1
FOR UPDATE`

// sqlMarkReplayed and sqlMarkDiscarded re-check status = 'open': the lock
// already guarantees it, and the condition keeps the statements safe on
// their own.
const sqlMarkReplayed = `
UPDATE dead_letters
SET status = 'replayed', resolved_by = $2, resolved_at = $3, resolution_reason = nullif($4, ''),
    replay_count = replay_count + 1, replay_outbox_id = $5, replay_outcome = $6,
    replay_subject_state = nullif($7, '')
WHERE id = $1 AND status = 'open'
RETURNING ` + summaryColumns

const sqlMarkDiscarded = `
UPDATE dead_letters
SET status = 'discarded', resolved_by = $2, resolved_at = $3, resolution_reason = $4
WHERE id = $1 AND status = 'open'
RETURNING ` + summaryColumns

// openQuery selects the open letters of sel (after < id <= upto and its
// filters; the status filter is always open), walking
// dead_letters_open_id_idx in id order, oldest first, as the letters failed.
// what is the select list.
func openQuery(what string, sel Selection) (string, []any) {
	var q query
	m := sel.Match
	m.Status = StatusOpen
	q.add("id > %s", sel.After)
	q.add("id <= %s", sel.Upto)
	if len(sel.IDs) > 0 {
		q.add("id = ANY(%s)", sel.IDs)
	}
	q.match(m)
	return `SELECT ` + what + ` FROM dead_letters WHERE ` + q.where(), q.args
}

func openIDsQuery(sel Selection, limit int) (string, []any) {
	sql, args := openQuery("id", sel)
	return sql + ` ORDER BY id LIMIT $` + strconv.Itoa(len(args)+1), append(args, limit)
}

// lockOpenQuery locks up to limit open letters of sel, oldest first. A
// letter resolved while this waits for its lock is re-checked against
// status = 'open' by Postgres and left out.
func lockOpenQuery(sel Selection, limit int) (string, []any) {
	sql, args := openIDsQuery(sel, limit)
	return sql + ` FOR UPDATE`, args
}

// sqlPendingAlerts claims letters nobody has been alerted about. SKIP LOCKED
// lets several dlq-admin replicas sweep at once without alerting twice.
const sqlPendingAlerts = `
SELECT ` + summaryColumns + `
FROM dead_letters
WHERE alert_pending
ORDER BY id
LIMIT $1
FOR UPDATE SKIP LOCKED`
