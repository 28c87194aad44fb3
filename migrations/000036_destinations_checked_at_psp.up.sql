-- A destination is checked at its PSP when it is registered, and the
-- registration keeps what was found: a Stripe connected account (acct_…)
-- with, for payouts to a bank or card of its own, one of its external
-- accounts (ba_…, card_…); a Paystack transfer recipient with its currency.
-- A payout is refused when its currency is not the one the destination
-- receives. Registrations from before carry no check (psp_checked_at NULL).
-- Expand only: new nullable columns that the previous release ignores.
SET lock_timeout = '5s';

ALTER TABLE destinations
    ADD COLUMN external_account text
        CHECK (external_account IS NULL OR (external_account <> '' AND octet_length(external_account) <= 255)),
    -- The currency the destination receives (lower case); NULL: any.
    ADD COLUMN currency text CHECK (currency IS NULL OR currency ~ '^[a-z]{3}$'),
    ADD COLUMN psp_checked_at timestamptz,
    -- What the PSP said, without personal data (account and bank numbers,
    -- names): capabilities, country, currencies, statuses.
    ADD COLUMN psp_record jsonb,
    -- Why a destination was disabled other than by its client (a data
    -- migration, an operator); NULL otherwise.
    ADD COLUMN disabled_reason text;

ALTER TABLE destinations ADD CONSTRAINT destinations_disabled_reason
    CHECK (disabled_reason IS NULL OR status = 'disabled');
