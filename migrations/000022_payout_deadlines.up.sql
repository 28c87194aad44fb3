-- Every unfinished payout state has a deadline (the payout-worker's sweeper,
-- services/payout-worker/internal/payout/deadline.go). A deadline runs from
-- when the payout entered its current state: status_since, kept by a
-- trigger so that every writer of payouts.status (the worker, webhook-api's
-- cancel) keeps it without remembering to. updated_at is no substitute: a
-- lookup that finds the payout still pending at the PSP touches the row
-- without changing its state.
--
-- Existing unfinished payouts take the time of their latest transition into
-- their state (or updated_at); finished ones keep this migration's time,
-- which nothing reads.
ALTER TABLE payouts
    ADD COLUMN status_since timestamptz NOT NULL DEFAULT now(),
    -- How many times the sweeper resumed the payout on its own after a
    -- deadline passed (its command published again), and when last. One
    -- is allowed; a payout that stalls again goes to a person.
    ADD COLUMN deadline_resumes integer NOT NULL DEFAULT 0 CHECK (deadline_resumes >= 0),
    ADD COLUMN deadline_resumed_at timestamptz;

UPDATE payouts p
SET status_since = coalesce((SELECT max(t.at) FROM payout_transitions t
                             WHERE t.payout_id = p.id AND t.to_status = p.status), p.updated_at)
WHERE p.status NOT IN ('SUCCEEDED', 'FINALIZED');

CREATE FUNCTION payouts_status_since() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status IS DISTINCT FROM OLD.status THEN
        NEW.status_since := now();
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER payouts_status_since
    BEFORE UPDATE OF status ON payouts
    FOR EACH ROW EXECUTE FUNCTION payouts_status_since();
