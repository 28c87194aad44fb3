SET lock_timeout = '5s';

ALTER TABLE wallets DROP COLUMN owed;
DROP TABLE IF EXISTS payment_returns;
