SET lock_timeout = '5s';

ALTER TABLE ledger_transactions DROP COLUMN message_id;
