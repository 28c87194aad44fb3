SET lock_timeout = '5s';

DROP INDEX IF EXISTS payouts_status_created_idx;
DROP TABLE IF EXISTS approvals;
DROP TABLE IF EXISTS payout_resolutions;
