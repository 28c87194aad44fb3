-- The SQL of ingest's commit path, compiled by sqlc into package sqlcdb
-- against the migrations' schema. Every statement here is sent inside a
-- pipelined transaction (pgx.Batch), never alone: sqlcdb/pipeline.go queues
-- each with its generated Params so that a group stays one or two round
-- trips (see doc.go).

-- name: InsertEvents :many
-- The one round trip path's insert: every event of a group in one
-- statement, because a duplicate must abort the whole pipelined
-- transaction (unique violation) so that no outbox row is committed for
-- it. webhook_events' dedupe trigger skips a duplicate (migration 000056:
-- no unique constraint spans its partitions), and
-- webhook_events_all_inserted turns the skipped row into the unique
-- violation of webhook_events_provider_event_id_key. The events are
-- inserted in key order: the trigger inserts each key into
-- webhook_event_keys, where a concurrent insert of it waits, so concurrent
-- groups wait on keys in one order. psp_objects gets each object's newest event of the
-- group (one upsert per object: a statement cannot update a row twice),
-- taken in key order so that concurrent groups lock the objects in one
-- order. An event is fresh when its object's upsert applied and nothing
-- newer about the object came in the same group; the rows come back in
-- input order.
WITH input AS (
    SELECT *
    FROM ROWS FROM (unnest(@providers::text[]), unnest(@event_ids::text[]), unnest(@event_types::text[]),
                    unnest(@object_ids::text[]), unnest(@user_ids::text[]), unnest(@amounts::bigint[]),
                    unnest(@currencies::text[]), unnest(@occurred_ats::timestamptz[]), unnest(@payloads::jsonb[]),
                    unnest(@correlation_ids::text[]), unnest(@statuses::text[]))
         WITH ORDINALITY AS i(provider, event_id, event_type, object_id, user_id, amount, currency,
                              occurred_at, payload, correlation_id, status, n)),
ev AS (
    INSERT INTO webhook_events
        (provider, event_id, event_type, object_id, user_id, amount, currency, occurred_at, payload, correlation_id, received_at)
    SELECT input.provider, input.event_id, input.event_type, nullif(input.object_id, ''), nullif(input.user_id, ''),
           nullif(input.amount, 0), nullif(input.currency, ''), input.occurred_at, input.payload, input.correlation_id,
           @received_at::timestamptz
    FROM input ORDER BY input.provider, input.event_id, input.n
    RETURNING 1),
newest AS (
    SELECT DISTINCT ON (input.provider, input.object_id) input.provider, input.object_id, input.status,
           input.event_type, input.event_id, input.occurred_at
    FROM input WHERE input.object_id <> ''
    ORDER BY input.provider, input.object_id, input.occurred_at DESC, input.n DESC),
obj AS (
    INSERT INTO psp_objects (provider, object_id, status, event_type, event_id, occurred_at)
    SELECT newest.provider, newest.object_id, nullif(newest.status, ''), newest.event_type, newest.event_id, newest.occurred_at
    FROM newest
    ON CONFLICT (provider, object_id) DO UPDATE
    SET status = EXCLUDED.status, event_type = EXCLUDED.event_type, event_id = EXCLUDED.event_id,
        occurred_at = EXCLUDED.occurred_at, updated_at = now()
    WHERE psp_objects.occurred_at <= EXCLUDED.occurred_at
    RETURNING psp_objects.provider, psp_objects.object_id, psp_objects.occurred_at)
SELECT coalesce(i.occurred_at >= o.occurred_at, false)::boolean AS fresh
FROM input i LEFT JOIN obj o ON o.provider = i.provider AND o.object_id = i.object_id
WHERE webhook_events_all_inserted((SELECT count(*) FROM input), (SELECT count(*) FROM ev))
ORDER BY i.n;

-- name: InsertEvent :one
-- Stores one event and, in the same statement, records its object's latest
-- seen time in psp_objects: the upsert only applies when the event is at
-- least as new as what was seen, so no row back means stale. track is
-- false for payout outcomes, which psp_objects does not track: their order
-- is the worker's to judge, on the events it applied. id is NULL for a
-- duplicate: webhook_events' dedupe trigger skips it (000056); before that
-- migration, ON CONFLICT DO NOTHING on the table's unique (provider,
-- event_id) did, so the statement runs on either schema (a conflict target
-- would not: a partitioned table has no unique index on the key). sqlc
-- types id int64; the store scans it into a pointer.
WITH ev AS (
    INSERT INTO webhook_events
        (provider, event_id, event_type, object_id, user_id, amount, currency, occurred_at, payload, correlation_id, received_at)
    VALUES (@provider::text, @event_id::text, @event_type::text, nullif(@object_id::text, ''), nullif(@user_id::text, ''),
            nullif(@amount::bigint, 0), nullif(@currency::text, ''), @occurred_at::timestamptz, @payload::jsonb, @correlation_id::text,
            @received_at::timestamptz)
    ON CONFLICT DO NOTHING
    RETURNING id),
obj AS (
    INSERT INTO psp_objects (provider, object_id, status, event_type, event_id, occurred_at)
    SELECT @provider::text, @object_id::text, nullif(@status::text, ''), @event_type::text, @event_id::text, @occurred_at::timestamptz
    FROM ev WHERE @object_id::text <> '' AND @track::boolean
    ON CONFLICT (provider, object_id) DO UPDATE
    SET status = EXCLUDED.status, event_type = EXCLUDED.event_type, event_id = EXCLUDED.event_id,
        occurred_at = EXCLUDED.occurred_at, updated_at = now()
    WHERE psp_objects.occurred_at <= EXCLUDED.occurred_at
    RETURNING 1)
SELECT (SELECT id FROM ev) AS id, (SELECT count(*) FROM obj)::int AS fresh;

-- name: InsertUnstorable :one
-- Records an event that cannot be stored as sent with what of it can be: no
-- psp_objects entry (it is never acted on) and no outbox row; its body goes
-- to the dead-letter store beside it. No row back: a duplicate (skipped
-- by webhook_events' dedupe trigger, or before 000056 by ON CONFLICT).
INSERT INTO webhook_events
    (provider, event_id, event_type, object_id, user_id, amount, currency, occurred_at, payload, correlation_id, received_at)
VALUES (@provider::text, @event_id::text, @event_type::text, nullif(@object_id::text, ''), nullif(@user_id::text, ''),
        nullif(@amount::bigint, 0), nullif(@currency::text, ''), @occurred_at::timestamptz, @payload::jsonb, @correlation_id::text,
        @received_at::timestamptz)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: PayoutOwner :one
SELECT user_id FROM payouts_for_api WHERE id = @id;

-- name: PaymentOwner :one
-- The wallet a payment was credited to (its ledger credit), so that a
-- refund or dispute of it shares the wallet's partition. None yet (the
-- credit is still on its way) is answered by no row; the worker then
-- refuses the event as about a payment never credited.
SELECT w.owner FROM ledger_transactions_for_api t
JOIN ledger_entries_for_api le ON le.transaction_id = t.id
JOIN wallets_for_api w ON w.id = le.wallet_id AND w.kind = 'user'
WHERE t.kind = 'credit' AND t.reference = @reference
LIMIT 1;
