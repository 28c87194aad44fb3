ALTER TABLE destinations DROP CONSTRAINT destinations_disabled_reason;
ALTER TABLE destinations DROP COLUMN external_account, DROP COLUMN currency, DROP COLUMN psp_checked_at,
    DROP COLUMN psp_record, DROP COLUMN disabled_reason;
