SET lock_timeout = '5s';

DROP TABLE payout_evidence;
DROP TABLE payout_attempts;
ALTER TABLE payouts
    DROP COLUMN outcome_unknown,
    DROP COLUMN lookup_needed,
    DROP COLUMN psp_key,
    DROP COLUMN first_attempt_at;
