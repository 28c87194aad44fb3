-- All SQL on transaction_outbox, compiled by sqlc into package sqlcdb. The
-- writers' statements (LockKeys, InsertMessages, Notify) are queued into the
-- caller's own pgx.Batch by their exported text (emit_exported_queries), so
-- they stay in the caller's round trip; the relay's statements run through
-- the generated methods. The parameters of a queued statement are given in
-- the order sqlc numbers them: the order they first appear below.

-- name: LockKeys :exec
-- The partition-key locks of a write (see the package doc): each key once,
-- in hash order, so that two writers of overlapping key sets always queue in
-- the same order and cannot deadlock.
SELECT pg_advisory_xact_lock(@namespace::int, h)
FROM (SELECT DISTINCT hashtext(k) AS h FROM unnest(@keys::text[]) AS k ORDER BY h) AS keys;

-- name: Notify :exec
SELECT pg_notify(@channel::text, '');

-- name: Claim :many
-- Takes due rows in id order, never while an earlier row of their key is
-- unfinished outside the claim, and hands out a run of consecutive rows of
-- one key at a time.
--
-- win: the window the heads are looked for in, the first @scan unfinished
-- rows after @after (the claimer's cursor, see Store.ClaimFrom), read from
-- the claim index alone. Without it a claim looked for heads until it had a
-- batch of them, and with fewer keys in the backlog than the batch (1,000
-- users, a batch of 2,000) that is every row of the backlog, each probed:
-- in the one-hour soak of 2026-11-29 a backlog of 100k took seconds a claim,
-- the backlog grew faster than the claims took it, and at 1.4M rows a claim
-- took 15-40 s. The head probe and the run still look at the whole key, so
-- the window bounds the cost, never the order: a row is a head only if it
-- is its key's first unfinished row anywhere. The window's end and size
-- come back with every row (and alone, in a row of NULLs, when nothing was
-- claimed) for the cursor.
--
-- heads: the first unfinished row of each key, if it is due: a row qualifies
-- only if no earlier row of its key is still pending, processing or failed.
-- Heads another relay is claiming right now are skipped (SKIP LOCKED), and
-- because the head is then still unfinished in this snapshot, the later rows
-- of its key are not taken either: only the relay holding a key's head can
-- take the rows behind it. A processing row whose lease ran out (its relay
-- died) is due again.
--
-- run: behind each locked head, the key's next unfinished rows in id order,
-- as long as every one of them is due (a row waiting for a retry or a later
-- NotBefore ends the run), so a hot key drains a batch per cycle instead of
-- one row. Heads fill the batch first; the room they leave goes to the
-- runs, position by position ((pos, id) order), so many keys share a
-- batch and a run is always a prefix of its key's backlog. The UPDATE checks
-- a follower is still unfinished and due: the Go side cuts a run at the
-- first position that did not survive that check (see Store.ClaimFrom).
WITH win AS (
    SELECT coalesce(max(w.id), 0)::bigint AS hi, count(*)::int AS n
    FROM (
        SELECT c.id FROM transaction_outbox c
        WHERE c.finished_at IS NULL AND c.id > 0 AND c.id > @after::bigint
        ORDER BY c.id
        LIMIT @scan::int
    ) w
),
heads AS (
    SELECT o.id, o.partition_key
    FROM transaction_outbox o
    -- finished_at IS NULL AND id > 0 walks transaction_outbox_claim_idx,
    -- the partial index of unfinished rows in id order (the dlq rows kept
    -- with their dead letters are never visited). id > 0 is always true; it
    -- is in that index's predicate so that only this walk can use it: the
    -- key look-ups below (the head probe, the run) imply finished_at IS NULL
    -- but not id > 0, so they always take the key's index. When both
    -- indexes had the same predicate, a VACUUM of an empty queue (index
    -- tuples: 0) made the planner see both as free, and it took the id
    -- index for the key look-ups too, reading the whole backlog per
    -- candidate: 5 s per claim on a 20k backlog instead of 0.1 s, and the
    -- relay fell half a minute behind (docs/reports/benchmarks.md, 2026-11-26).
    -- Due: a pending or failed row whose retry time has come, or a
    -- processing row whose lease ran out. Written as one CASE on purpose: the
    -- equivalent OR of ANDs gets a tiny default selectivity on a table
    -- without fresh statistics (a burst), and the planner then sorts the
    -- whole backlog instead of walking the index (300 ms instead of 6 ms).
    WHERE o.finished_at IS NULL AND o.id > 0
      AND o.id > @after AND o.id <= (SELECT hi FROM win)
      AND CASE WHEN o.status = 'processing' THEN o.locked_until < @now::timestamptz
               ELSE o.next_retry_at <= @now END
      -- The key's first unfinished row: one probe of the key's partial
      -- index per candidate. The key is matched as a range of the index,
      -- (partition_key, id) >= (key, 0) and partition_key <= key, ordered
      -- by (partition_key, id), not as partition_key = key ordered by id:
      -- with an equality the planner may equally walk the primary key in id
      -- order and filter on the key, which reads the backlog from its start
      -- for every probe, and on a queue analyzed while empty (published rows
      -- are deleted, so it often is) it did: a minute a claim on a 200k
      -- backlog. As a range only the key's index gives that order without a
      -- sort, and StoreSettings turn sorts off. Not NOT EXISTS (… e.id < o.id): once the
      -- statistics see a key holding most of the backlog, the planner turns
      -- that into a hash anti join whose join filter compares every pair of
      -- the key's rows (50M comparisons, 6 s, for one key of 10k rows).
      -- And <= rather than the equivalent = (o is unfinished, so the first
      -- is never after it): = is estimated at 0.5 %, and the planner then
      -- expects too few heads to stop early and sorts the whole backlog;
      -- <= is estimated at a third, and it walks the index.
      AND o.id <= (
            SELECT e.id FROM transaction_outbox e
            WHERE (e.partition_key, e.id) >= (o.partition_key, 0::bigint)
              AND e.partition_key <= o.partition_key
              AND e.finished_at IS NULL
            ORDER BY e.partition_key, e.id
            LIMIT 1)
    ORDER BY o.id
    LIMIT @batch::int
    FOR UPDATE SKIP LOCKED
),
-- The room the heads leave, and how far each head's run can reach into it:
-- runs are taken position by position, so with r heads that have a row
-- behind them none needs more than ceil(room / r) rows (one hot key: all
-- the room; a thousand keys with backlogs and a room of a thousand: one
-- each, where reading the room behind every head read the whole backlog of
-- a thousand keys). Whether a head has a row behind it is one probe of the
-- key index, ordered as the run reads it.
runners AS (
    SELECT count(*)::int AS r
    FROM heads h
    WHERE (SELECT e.id FROM transaction_outbox e
           WHERE (e.partition_key, e.id) > (h.partition_key, h.id)
             AND e.partition_key <= h.partition_key
             AND e.finished_at IS NULL
           ORDER BY e.partition_key, e.id
           LIMIT 1) IS NOT NULL
),
room AS (
    SELECT (sqlc.arg(batch)::int - count(*))::int AS n,
           ((sqlc.arg(batch)::int - count(*) + greatest((SELECT r FROM runners), 1) - 1)
             / greatest((SELECT r FROM runners), 1))::int AS per_head
    FROM heads
),
run AS (
    SELECT h.id, 0::bigint AS pos FROM heads h
    UNION ALL
    SELECT f.id, f.pos
    FROM heads h
    CROSS JOIN room
    CROSS JOIN LATERAL (
        SELECT c.id, c.pos
        FROM (
            -- The key's index (partition_key, id) WHERE finished_at IS NULL,
            -- read in order from the head and only as far as the room
            -- allows; the key matched as a range, as in the head probe.
            SELECT o.id, row_number() OVER w AS pos,
                   bool_and(CASE WHEN o.status = 'processing' THEN o.locked_until < @now
                                 ELSE o.next_retry_at <= @now END) OVER w AS all_due
            FROM transaction_outbox o
            WHERE (o.partition_key, o.id) > (h.partition_key, h.id)
              AND o.partition_key <= h.partition_key
              AND o.finished_at IS NULL
            WINDOW w AS (ORDER BY o.partition_key, o.id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
            ORDER BY o.partition_key, o.id
            LIMIT room.per_head
        ) c
        WHERE c.all_due
    ) f
    WHERE room.n > 0
),
picked AS (
    SELECT id, pos FROM run ORDER BY pos, id LIMIT @batch
),
-- The picked rows as two arrays in id order: the UPDATE finds its rows by
-- the primary key from the ids (one look-up each, whatever the planner
-- thinks of the table's size; joined to picked, a planner that took the
-- table for one row scanned all of it to join it) and reads each row's
-- position beside its id.
pick AS (
    SELECT array_agg(id ORDER BY id) AS ids, array_agg(pos ORDER BY id) AS poss FROM picked
),
-- Changes no indexed column: a HOT update when the page has room.
claimed AS (
    UPDATE transaction_outbox t
    SET status = 'processing', locked_by = @owner::text, locked_until = @locked_until::timestamptz, updated_at = @now
    FROM pick
    WHERE t.id = ANY (pick.ids)
      AND (pick.poss[array_position(pick.ids, t.id)] = 0
           OR (t.finished_at IS NULL
               AND CASE WHEN t.status = 'processing' THEN t.locked_until < @now
                        ELSE t.next_retry_at <= @now END))
    RETURNING t.id, t.topic, t.event_type, t.partition_key, t.payload, t.headers, t.correlation_id,
              t.retry_count, t.max_retries, t.created_at, pick.poss[array_position(pick.ids, t.id)]::bigint AS pos
)
SELECT w.hi AS window_end, w.n AS window_rows,
       c.id, c.topic, c.event_type, c.partition_key, c.payload, c.headers, c.correlation_id,
       c.retry_count, c.max_retries, c.created_at, c.pos
FROM win w LEFT JOIN claimed c ON true;

-- name: DeletePublished :execrows
-- Settles published rows by deleting them: once Kafka has acknowledged a
-- row nothing reads it again (the consumers' idempotency, the dead letters
-- and the ledger are the records), and a delete writes no new row version
-- and no index entry, where marking it processed wrote both and left a
-- purge for later. Only rows still claimed by owner: a row whose lease ran
-- out is another relay's to settle.
DELETE FROM transaction_outbox
WHERE id = ANY(@ids::bigint[]) AND status = 'processing' AND locked_by = @owner::text;

-- name: Retry :one
UPDATE transaction_outbox
SET status = 'failed', retry_count = retry_count + 1, last_error = @error::text, next_retry_at = @next_retry_at,
    retry_history = retry_history || jsonb_build_array(jsonb_build_object('at', now(), 'error', @error::text, 'class', @class::text)),
    updated_at = now(), locked_by = NULL, locked_until = NULL
WHERE id = @id AND status = 'processing' AND locked_by = @owner::text
RETURNING retry_count;

-- name: Release :exec
UPDATE transaction_outbox
SET status = 'pending', next_retry_at = @next_retry_at, updated_at = now(), locked_by = NULL, locked_until = NULL
WHERE id = ANY(@ids::bigint[]) AND status = 'processing' AND locked_by = @owner::text;

-- name: SynchronousCommit :exec
-- For the rest of the transaction: its commit waits for the WAL flush even
-- on the store's sessions, which run with synchronous_commit off.
SELECT set_config('synchronous_commit', 'on', true);

-- name: MarkDeadLetter :one
UPDATE transaction_outbox
SET status = 'dlq', retry_count = retry_count + 1, last_error = @error::text, updated_at = now(), finished_at = now(),
    retry_history = retry_history || jsonb_build_array(jsonb_build_object('at', now(), 'error', @error::text, 'class', @class::text)),
    locked_by = NULL, locked_until = NULL
WHERE id = @id AND status = 'processing' AND locked_by = @owner::text
RETURNING retry_count, created_at, retry_history;

-- name: PurgeProcessed :execrows
-- Rows marked processed by a relay of an earlier version (before the
-- upgrade, or an old replica during a rolling deploy), which deleted its
-- published rows only after a retention: none are written any more.
DELETE FROM transaction_outbox
WHERE id IN (SELECT p.id FROM transaction_outbox p
             WHERE p.finished_at IS NOT NULL AND p.status = 'processed'
             ORDER BY p.finished_at LIMIT @max_rows);

-- name: Stats :one
SELECT count(*) AS unfinished, coalesce(extract(epoch FROM sqlc.arg(now)::timestamptz - min(created_at)), 0)::float8 AS oldest_age_seconds
FROM transaction_outbox
WHERE finished_at IS NULL;

-- name: InsertMessages :many
-- Writes any number of rows in one statement. The ORDER BY draws the ids in
-- the order the messages were given (Postgres evaluates the volatile id
-- default after the sort). ROWS FROM (unnest(a), unnest(b), ...) is what
-- Postgres makes of the multi-argument unnest(a, b, ...), which sqlc's
-- catalog does not know: the same statement.
INSERT INTO transaction_outbox
    (topic, event_type, partition_key, payload, headers, correlation_id, max_retries, next_retry_at)
SELECT m.topic, m.event_type, m.partition_key, m.payload, m.headers, m.correlation_id,
       coalesce(m.max_retries, 6), coalesce(m.next_retry_at, now())
FROM ROWS FROM (unnest(@topics::text[]), unnest(@event_types::text[]), unnest(@partition_keys::text[]),
                unnest(@payloads::jsonb[]), unnest(@headers::jsonb[]), unnest(@correlation_ids::text[]),
                unnest(@max_retries::int[]), unnest(@next_retry_ats::timestamptz[]))
     WITH ORDINALITY AS m(topic, event_type, partition_key, payload, headers, correlation_id, max_retries, next_retry_at, n)
ORDER BY m.n
RETURNING id;
