-- Step 3 of partitioning webhook_events by received_at
-- (docs/operations/partition-webhook-events.md): one short transaction.
-- The table becomes webhook_events_legacy, the partition [MINVALUE,
-- cutover) of a new partitioned webhook_events: ATTACH finds 000047's
-- validated CHECK and scans nothing, and it finds 000045's and 000046's
-- indexes for the parent's and builds nothing. Daily partitions follow
-- from the cutover for partition_policies.premake_days; pkg/partition's
-- keeper keeps them ahead and drops those past the retention.
--
-- Locks: ALTER TABLE ... RENAME takes ACCESS EXCLUSIVE on the old table
-- for the rest of the transaction; ingest's inserts wait for it (a few
-- milliseconds of catalog work) and then go to the new table. lock_timeout
-- bounds the wait for the lock itself: a long query on the table makes the
-- migration fail and be run again, rather than queue every insert behind
-- it.
--
-- Dedupe. (provider, event_id) can no longer be a unique constraint (a
-- partitioned table's unique keys must hold received_at). Every insert
-- passes webhook_events_dedupe, a BEFORE INSERT row trigger: it records the
-- key in webhook_event_keys (000044; its keys of the horizon were recorded
-- since 000047) with INSERT ... ON CONFLICT, which takes the key's unique
-- index entry, so a concurrent insert of the key waits for the first's
-- transaction and then sees its committed key; a key already there and
-- younger than the dedupe horizon makes the row a duplicate, skipped (no
-- error, no row back: ON CONFLICT DO NOTHING's answer). The multi-row
-- insert of ingest's one round trip path turns a skipped row into a unique
-- violation of webhook_events_provider_event_id_key
-- (webhook_events_all_inserted), the error the store already takes for a
-- duplicate there.
SET lock_timeout = '5s';

ALTER TABLE webhook_events RENAME TO webhook_events_legacy;
ALTER TABLE webhook_events_legacy RENAME CONSTRAINT webhook_events_pkey TO webhook_events_legacy_pkey;
-- The partitioned table's primary key is (id, received_at): the legacy
-- partition's matching index must back a constraint to be attached to it.
ALTER TABLE webhook_events_legacy
    ADD CONSTRAINT webhook_events_legacy_id_received_at_key UNIQUE USING INDEX webhook_events_id_received_at_key;
ALTER INDEX webhook_events_provider_event_id_idx RENAME TO webhook_events_legacy_provider_event_id_idx;
-- The parent's dedupe trigger (below) records the keys from now on.
DROP TRIGGER webhook_event_keys_track ON webhook_events_legacy;
DROP FUNCTION webhook_event_keys_track();
-- Partitions are reached through the parent only.
REVOKE ALL ON webhook_events_legacy FROM aegis_webhook_api;

CREATE TABLE webhook_events (
    id             bigint      GENERATED ALWAYS AS IDENTITY,
    provider       text        NOT NULL CONSTRAINT webhook_events_provider_check CHECK (provider IN ('stripe', 'paystack')),
    event_id       text        NOT NULL CONSTRAINT webhook_events_event_id_check CHECK (event_id <> ''),
    event_type     text        NOT NULL,
    object_id      text,
    user_id        text,
    amount         bigint,
    currency       text,
    occurred_at    timestamptz,
    payload        jsonb       NOT NULL,
    correlation_id text        NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_events_pkey PRIMARY KEY (id, received_at)
) PARTITION BY RANGE (received_at);
CREATE INDEX webhook_events_provider_event_id_idx ON webhook_events (provider, event_id);

-- Ids go on from the legacy table's (nothing inserts into it while this
-- transaction holds its lock).
DO $$
DECLARE
    next bigint;
BEGIN
    SELECT greatest(coalesce(max(id), 0), coalesce(pg_sequence_last_value(pg_get_serial_sequence('webhook_events_legacy', 'id')::regclass), 0)) + 1
    INTO next FROM webhook_events_legacy;
    EXECUTE format('ALTER TABLE webhook_events ALTER COLUMN id RESTART WITH %s', next);
END
$$;

DO $$
DECLARE
    cutover timestamptz;
BEGIN
    SELECT (regexp_match(pg_get_constraintdef(oid), '''([^'']+)'''))[1]::timestamptz INTO cutover
    FROM pg_constraint WHERE conrelid = 'webhook_events_legacy'::regclass AND conname = 'webhook_events_received_at_cutover';
    IF cutover IS NULL THEN
        RAISE EXCEPTION 'webhook_events_legacy has no cutover CHECK (000047)';
    END IF;
    EXECUTE format('ALTER TABLE webhook_events ATTACH PARTITION webhook_events_legacy FOR VALUES FROM (MINVALUE) TO (%L)', cutover);
END
$$;

GRANT SELECT, INSERT ON webhook_events TO aegis_webhook_api;

CREATE FUNCTION webhook_events_dedupe() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
DECLARE
    horizon interval;
    fresh   boolean;
BEGIN
    SELECT p.dedupe_horizon INTO horizon FROM partition_policies p WHERE p.table_name = 'webhook_events';
    IF horizon IS NULL THEN
        RAISE EXCEPTION 'webhook_events has no dedupe horizon in partition_policies';
    END IF;
    -- A key older than the horizon (not trimmed yet) is taken as new and
    -- its time renewed.
    INSERT INTO webhook_event_keys AS k (provider, event_id, received_at)
    VALUES (NEW.provider, NEW.event_id, NEW.received_at)
    ON CONFLICT (provider, event_id) DO UPDATE SET received_at = EXCLUDED.received_at
        WHERE k.received_at < EXCLUDED.received_at - horizon
    RETURNING true INTO fresh;
    IF fresh THEN
        RETURN NEW;
    END IF;
    RETURN NULL;
END
$$;
REVOKE EXECUTE ON FUNCTION webhook_events_dedupe() FROM PUBLIC;
CREATE TRIGGER webhook_events_dedupe BEFORE INSERT ON webhook_events
    FOR EACH ROW EXECUTE FUNCTION webhook_events_dedupe();

-- The partitions from the cutover on.
SELECT maintain_partitions('webhook_events');
