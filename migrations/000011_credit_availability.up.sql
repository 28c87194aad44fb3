-- Settlement delay: with CREDIT_SETTLEMENT_DELAY > 0 a credit is
-- in the wallet at once but can be paid out only from available_at on. One
-- row per credit posted while a delay was configured; with the default (0)
-- no row is ever written and payouts behave as before.
SET lock_timeout = '5s';

CREATE TABLE credit_availability (
    reference    text        PRIMARY KEY, -- the credit's ledger_transactions.reference
    user_id      text        NOT NULL,
    currency     text        NOT NULL,
    amount       bigint      NOT NULL CHECK (amount > 0),
    available_at timestamptz NOT NULL
);

CREATE INDEX credit_availability_wallet_idx ON credit_availability (user_id, currency, available_at);
