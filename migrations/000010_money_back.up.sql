-- Money that goes back: refunds and disputes of payments we
-- credited. See docs/reference/accounting.md for the accounts and every posting.
SET lock_timeout = '5s';

-- One row per PSP refund or dispute object: the state the ledger reflects.
-- PSP events are evidence about these objects and arrive late, twice and out
-- of order; the worker locks the row, compares the event's outcome with the
-- state and posts only the difference, so any order of events ends in the
-- same ledger. A refund is 'refunded' (money left) or 'void' (failed or
-- canceled, nothing left, or a posted refund reversed); a dispute is 'open'
-- (its amount held in the disputes account), 'won' (released) or 'lost'.
CREATE TABLE payment_returns (
    provider          text        NOT NULL,
    object_id         text        NOT NULL CHECK (object_id <> ''),
    kind              text        NOT NULL CHECK (kind IN ('refund', 'dispute')),
    -- the credit it takes money back from: ledger_transactions.reference
    payment_reference text        NOT NULL,
    user_id           text        NOT NULL,
    currency          text        NOT NULL CHECK (currency ~ '^[a-z]{3}$'),
    amount            bigint      NOT NULL CHECK (amount > 0),
    state             text        NOT NULL CHECK (
        (kind = 'refund' AND state IN ('refunded', 'void')) OR
        (kind = 'dispute' AND state IN ('open', 'won', 'lost'))),
    last_event_id     text        NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    -- kind too: a PSP may number refunds and disputes from one sequence each
    PRIMARY KEY (provider, kind, object_id)
);

CREATE INDEX payment_returns_payment_idx ON payment_returns (payment_reference);

-- What a user owes the platform: the part of a refund or lost dispute their
-- wallet could not cover (the balance never goes negative). It mirrors the
-- user's share of the receivables account, is kept under the wallet's row
-- lock, is repaid first from every later credit, and blocks payouts while
-- it is not zero.
ALTER TABLE wallets ADD COLUMN owed bigint NOT NULL DEFAULT 0
    CONSTRAINT wallets_owed_non_negative CHECK (owed >= 0);
