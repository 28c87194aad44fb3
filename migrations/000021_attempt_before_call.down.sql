SET lock_timeout = '5s';

REVOKE UPDATE (outcome, psp_reference, error) ON payout_attempts FROM aegis_payout_worker;

-- A create whose answer was never recorded may have executed.
UPDATE payout_attempts SET outcome = 'unknown' WHERE outcome = 'sending';
ALTER TABLE payout_attempts DROP CONSTRAINT payout_attempts_outcome_check;
ALTER TABLE payout_attempts ADD CONSTRAINT payout_attempts_outcome_check
    CHECK (outcome IN ('accepted', 'refused', 'not_executed', 'unknown', 'found', 'not_found'));

ALTER TABLE payouts DROP COLUMN sending_at;
