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
