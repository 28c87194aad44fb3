package store

// summaryColumns are scanned by scanSummary, in this order. The payload itself
// is not read for lists: only its size.
const summaryColumns = `
    id, source, original_topic, original_partition, original_offset,
    coalesce(consumer_group, ''), outbox_id, partition_key, event_type,
    error, error_class, retry_count, first_failure_at, failed_at, correlation_id,
    status, replay_count, replay_outbox_id, resolved_by, resolved_at,
    resolution_reason, created_at, octet_length(payload)`

// sqlList is one statement for every combination of filters: an empty text
// parameter or a NULL time means "no filter". The keyset condition is
// `id < $1` (MaxInt64 on the first page) rather than `$1 IS NULL OR ...`, so
// that it stays an index condition on dead_letters_list_idx even under a
// generic plan.
const sqlList = `
SELECT ` + summaryColumns + `
FROM dead_letters
WHERE id < $1
  AND ($2::text = '' OR original_topic = $2)
  AND ($3::text = '' OR status = $3)
  AND ($4::text = '' OR error_class = $4)
  AND ($5::timestamptz IS NULL OR failed_at >= $5)
  AND ($6::timestamptz IS NULL OR failed_at < $6)
ORDER BY id DESC
LIMIT $7`

const sqlGet = `
SELECT ` + summaryColumns + `, payload, headers, retry_history
FROM dead_letters
WHERE id = $1`

// sqlStats counts every letter once per (topic, status); min(failed_at) of the
// open group is the oldest open letter of that topic.
const sqlStats = `
SELECT original_topic, status, count(*), min(failed_at)
FROM dead_letters
GROUP BY original_topic, status
ORDER BY original_topic, status`

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
    replay_count = replay_count + 1, replay_outbox_id = $5
WHERE id = $1 AND status = 'open'
RETURNING ` + summaryColumns

const sqlMarkDiscarded = `
UPDATE dead_letters
SET status = 'discarded', resolved_by = $2, resolved_at = $3, resolution_reason = $4
WHERE id = $1 AND status = 'open'
RETURNING ` + summaryColumns

const sqlInsertAudit = `
INSERT INTO audit_log (actor, action, target_type, target_id, reason, detail, at)
VALUES ($1, $2, $3, $4, nullif($5, ''), $6, $7)`

// openMatch is the filter of bulk replay: open letters in (after, upto]
// matching topic, error class and failure time. It walks
// dead_letters_open_id_idx in id order, oldest first, as the letters failed.
const openMatch = `
FROM dead_letters
WHERE status = 'open'
  AND id > $1 AND id <= $2
  AND ($3::text = '' OR original_topic = $3)
  AND ($4::text = '' OR error_class = $4)
  AND ($5::timestamptz IS NULL OR failed_at >= $5)
  AND ($6::timestamptz IS NULL OR failed_at < $6)`

const sqlOpenIDs = `SELECT id ` + openMatch + `
ORDER BY id
LIMIT $7`

const sqlCountOpen = `SELECT count(*) ` + openMatch

const sqlMaxID = `SELECT coalesce(max(id), 0) FROM dead_letters`

// sqlPendingAlerts claims letters nobody has been alerted about. SKIP LOCKED
// lets several dlq-admin replicas sweep at once without alerting twice.
const sqlPendingAlerts = `
SELECT ` + summaryColumns + `
FROM dead_letters
WHERE alert_pending
ORDER BY id
LIMIT $1
FOR UPDATE SKIP LOCKED`

const sqlClearAlerts = `UPDATE dead_letters SET alert_pending = false WHERE id = ANY($1)`
