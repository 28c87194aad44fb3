package outbox

// The one statement on transaction_outbox that is not in queries.sql: sqlc
// cannot compile a multi-argument unnest(…) WITH ORDINALITY (its catalog
// knows unnest of one array only), and rewriting the insert as one unnest per
// column in the select list would change the statement the writers' hot path
// runs. It is queued by Queue into the caller's pgx.Batch like LockKeys.

// sqlInsert writes any number of rows in one statement. The ORDER BY draws
// the ids in the order the messages were given (Postgres evaluates the
// volatile id default after the sort).
const sqlInsert = `
INSERT INTO transaction_outbox
    (topic, event_type, partition_key, payload, headers, correlation_id, max_retries, next_retry_at)
SELECT m.topic, m.event_type, m.partition_key, m.payload, m.headers, m.correlation_id,
       coalesce(m.max_retries, 6), coalesce(m.next_retry_at, now())
FROM unnest($1::text[], $2::text[], $3::text[], $4::jsonb[], $5::jsonb[], $6::text[], $7::int[], $8::timestamptz[])
     WITH ORDINALITY AS m(topic, event_type, partition_key, payload, headers, correlation_id, max_retries, next_retry_at, n)
ORDER BY m.n
RETURNING id`
