-- All SQL of package dlq, compiled by sqlc into package sqlcdb.

-- name: InsertDeadLetter :one
-- ON CONFLICT without a target covers every unique index: the origin of a
-- consumer letter, the outbox row of a relay letter, and the DLQ record a
-- letter was read from. No row back means the letter was already stored.
INSERT INTO dead_letters
    (source, original_topic, original_partition, original_offset, consumer_group, outbox_id,
     partition_key, event_type, payload, headers, error, error_class, retry_count, retry_history,
     first_failure_at, failed_at, correlation_id, dlq_topic, dlq_partition, dlq_offset)
VALUES (@source, @original_topic, sqlc.narg(original_partition), sqlc.narg(original_offset),
        nullif(@consumer_group::text, ''), sqlc.narg(outbox_id), @partition_key, @event_type,
        @payload, @headers, @error, @error_class, @retry_count, @retry_history,
        @first_failure_at, @failed_at, @correlation_id,
        nullif(@dlq_topic::text, ''), sqlc.narg(dlq_partition), sqlc.narg(dlq_offset))
ON CONFLICT DO NOTHING
RETURNING id;
