-- Step 2 of partitioning webhook_events: a CHECK that every row is older
-- than the cutover, the upper bound the table will have as the first
-- partition, so that ATTACH (000049) needs no scan under its lock. The
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
