-- Money safety at the front door: payouts go only to destinations
-- registered for their user. See services/webhook-api/internal/destinations.
SET lock_timeout = '5s';

-- A place a user's money may be paid to, registered by an API client acting
-- for the user: a Stripe external account (ba_…, card_…) or connected
-- account (acct_…), or a Paystack transfer recipient (RCP_…). Rows are never
-- deleted: a disabled destination stays as the record of what payouts used.
CREATE TABLE destinations (
    id          uuid        PRIMARY KEY,
    user_id     text        NOT NULL CHECK (user_id <> '' AND octet_length(user_id) <= 128),
    provider    text        NOT NULL CHECK (provider IN ('stripe', 'paystack')),
    destination text        NOT NULL CHECK (destination <> '' AND octet_length(destination) <= 255),
    type        text        NOT NULL
                CHECK (type IN ('bank_account', 'card', 'connected_account', 'transfer_recipient')),
    status      text        NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'disabled')),
    created_by  text        NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    disabled_by text,
    disabled_at timestamptz,
    CONSTRAINT destinations_disabled CHECK ((status = 'disabled') = (disabled_at IS NOT NULL AND disabled_by IS NOT NULL))
);

-- Registration is idempotent while a destination is active: registering the
-- same one again finds it. Once disabled it can be registered anew (a new
-- id), and the disabled row keeps its history.
CREATE UNIQUE INDEX destinations_active_key ON destinations (user_id, provider, destination) WHERE status = 'active';
CREATE INDEX destinations_user_idx ON destinations (user_id, created_at DESC, id DESC);

-- The destination a payout was accepted for. NULL for payouts from before
-- registration existed. NOT VALID: every existing row is NULL, so there is
-- nothing to check and no reason to scan payouts under a lock; new rows are
-- checked as usual.
ALTER TABLE payouts ADD COLUMN destination_id uuid;
ALTER TABLE payouts ADD CONSTRAINT payouts_destination_fk
    FOREIGN KEY (destination_id) REFERENCES destinations (id) NOT VALID;
