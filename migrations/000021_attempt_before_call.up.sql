-- A create is on disk before it is on the wire: its key, attempt number and
-- send time are committed before the PSP is called, so a call whose answer
-- is never recorded (the worker stopped during it, Postgres away, the
-- wallet lock lost) is known to have been made. See
-- services/payout-worker/internal/payout (attempt.go).
SET lock_timeout = '5s';

-- sending_at: when the create whose answer is not recorded yet was sent;
-- NULL when there is none. A payout found in SENDING_TO_GATEWAY with it set
-- is resumed as an unknown outcome from that time (the call may have
-- executed), so the settle window and the idempotency window apply to it.
ALTER TABLE payouts ADD COLUMN sending_at timestamptz;

-- 'sending': the create row written before the call; its outcome is set
-- once the answer is recorded, or to 'unknown' when a resume finds it
-- never was.
ALTER TABLE payout_attempts DROP CONSTRAINT payout_attempts_outcome_check;
ALTER TABLE payout_attempts ADD CONSTRAINT payout_attempts_outcome_check
    CHECK (outcome IN ('sending', 'accepted', 'refused', 'not_executed', 'unknown', 'found', 'not_found'));

-- The worker sets a create's outcome once it learns it: only these columns.
GRANT UPDATE (outcome, psp_reference, error) ON payout_attempts TO aegis_payout_worker;

-- Payouts left in SENDING_TO_GATEWAY by the previous release may have been
-- sent: they are resumed as unknown outcomes from the time they moved there
-- (updated_at, at or before their call), and their first attempt dates from
-- then at the latest.
UPDATE payouts
SET sending_at = updated_at, first_attempt_at = coalesce(first_attempt_at, updated_at)
WHERE status = 'SENDING_TO_GATEWAY';
