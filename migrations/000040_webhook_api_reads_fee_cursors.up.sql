-- The PSP reconciliation (webhook-api) compares the PSP's balance with the
-- clearing account. Stripe's fees reach the ledger only when payout-worker's
-- fee collector reads them (psp_fee_cursors.read_to: how far it has read),
-- so a credit posted after that has a fee the ledger does not show yet; the
-- comparison allows for it. webhook-api reads the cursor through a view of
-- its own, as it reads payout-worker's other tables. Expand only.
SET lock_timeout = '5s';

CREATE VIEW psp_fee_cursors_for_api AS
SELECT provider, read_to FROM psp_fee_cursors;

GRANT SELECT ON psp_fee_cursors_for_api TO aegis_webhook_api;
