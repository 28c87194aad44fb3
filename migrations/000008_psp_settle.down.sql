SET lock_timeout = '5s';

ALTER TABLE payouts DROP COLUMN last_unknown_at;
