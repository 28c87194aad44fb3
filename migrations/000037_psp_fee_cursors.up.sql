-- Stripe's fees are not in its payment events: payout-worker reads them
-- from Stripe's balance transactions (services/payout-worker/internal/fees)
-- and posts each once (psp_fee, reference stripe:<txn id>). Per provider,
-- how far that record has been read; the next round starts at read_to
-- minus an overlap. Written by payout-worker only.
SET lock_timeout = '5s';

CREATE TABLE psp_fee_cursors (
    provider   text        PRIMARY KEY CHECK (provider IN ('stripe', 'paystack')),
    read_to    timestamptz NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

GRANT SELECT, INSERT, UPDATE ON psp_fee_cursors TO aegis_payout_worker;
