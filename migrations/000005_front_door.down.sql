SET lock_timeout = '5s';

ALTER TABLE payouts DROP COLUMN destination_id;
DROP TABLE destinations;
