-- Step 2 of partitioning webhook_events: a CHECK that every row is older
-- than the cutover, the upper bound the table will have as the first
-- partition, so that ATTACH (000056) needs no scan under its lock. The
-- cutover is midnight UTC three days after this migration runs: rows keep
-- arriving (received_at is now) until the swap, and until the cutover they
-- go to this table as the partition [MINVALUE, cutover). NOT VALID: adding
-- it takes a brief ACCESS EXCLUSIVE lock and scans nothing; 000048
-- validates it without blocking writes. Its own file, so that the
-- validation does not run inside this lock's transaction.
SET lock_timeout = '5s';

DO $$
BEGIN
    EXECUTE format('ALTER TABLE webhook_events ADD CONSTRAINT webhook_events_received_at_cutover CHECK (received_at < %L) NOT VALID',
                   date_trunc('day', now(), 'UTC') + interval '3 days');
END
$$;

-- From now on every inserted event's key is recorded in webhook_event_keys
-- (000044), the dedupe of the partitioned table (000056); 000048 records
-- the keys of the horizon inserted before. The table's own unique
-- constraint still decides duplicates here: the trigger records and never
-- skips a row, so the previous release's ingest works as before. CREATE
-- TRIGGER takes SHARE ROW EXCLUSIVE, as briefly as the CHECK's lock.
CREATE FUNCTION webhook_event_keys_track() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
BEGIN
    INSERT INTO webhook_event_keys (provider, event_id, received_at)
    VALUES (NEW.provider, NEW.event_id, NEW.received_at)
    ON CONFLICT (provider, event_id) DO NOTHING;
    RETURN NEW;
END
$$;
REVOKE EXECUTE ON FUNCTION webhook_event_keys_track() FROM PUBLIC;
CREATE TRIGGER webhook_event_keys_track BEFORE INSERT ON webhook_events
    FOR EACH ROW EXECUTE FUNCTION webhook_event_keys_track();
