-- Aegis schema, version 1. See docs/design/architecture.md.
-- Every constraint here protects money or an idempotency promise; the Go code
-- relies on them rather than re-checking.

SET lock_timeout = '5s';

-- Inbox of verified PSP events. (provider, event_id) is the durable dedupe:
-- it is also Paystack's only replay protection (Paystack signs no timestamp).
CREATE TABLE webhook_events (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider       text        NOT NULL CHECK (provider IN ('stripe', 'paystack')),
    event_id       text        NOT NULL CHECK (event_id <> ''),
    event_type     text        NOT NULL,
    object_id      text,
    user_id        text,
    amount         bigint,
    currency       text,
    occurred_at    timestamptz,
    payload        jsonb       NOT NULL,
    correlation_id text        NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT webhook_events_provider_event_id_key UNIQUE (provider, event_id)
);

-- Transactional outbox: written in the same transaction as the business change,
-- moved to Kafka by outbox-relay. Rows of one partition_key are published in id
-- order; writers take a per-key transaction lock before inserting so that id
-- order is commit order per key (see pkg/outbox).
CREATE TABLE transaction_outbox (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    topic          text        NOT NULL CHECK (topic <> ''),
    event_type     text        NOT NULL,
    partition_key  text        NOT NULL DEFAULT '',
    payload        jsonb       NOT NULL,
    headers        jsonb       NOT NULL DEFAULT '{}'::jsonb,
    status         text        NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'processing', 'processed', 'failed', 'dlq')),
    correlation_id text        NOT NULL DEFAULT '',
    retry_count    integer     NOT NULL DEFAULT 0 CHECK (retry_count >= 0),
    max_retries    integer     NOT NULL DEFAULT 6 CHECK (max_retries >= 0),
    last_error     text,
    retry_history  jsonb       NOT NULL DEFAULT '[]'::jsonb,
    next_retry_at  timestamptz NOT NULL DEFAULT now(),
    locked_by      text,
    locked_until   timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    processed_at   timestamptz
);

-- Serves the relay's claim, which walks unfinished rows in id order: only rows
-- that still need work are indexed, so the scan never visits the processed
-- rows that wait for retention.
CREATE INDEX transaction_outbox_unfinished_idx
    ON transaction_outbox (id)
    WHERE status IN ('pending', 'processing', 'failed');

-- Serves the per-key ordering check ("is an earlier row of this key unfinished?").
CREATE INDEX transaction_outbox_unfinished_key_idx
    ON transaction_outbox (partition_key, id)
    WHERE status IN ('pending', 'processing', 'failed');

CREATE INDEX transaction_outbox_processed_idx
    ON transaction_outbox (processed_at)
    WHERE status = 'processed';

-- Accounts of the double-entry ledger. kind 'user' is a customer's wallet:
-- its balance is kept on the row (the row lock serializes its movements) and
-- can never go negative. kind 'system' accounts (PSP clearing, payout holds)
-- mirror money outside the wallets; every credit touches one, so keeping a
-- running balance there would serialize all credits on one hot row. Their
-- balance is the sum of their entries and the column stays 0.
CREATE TABLE wallets (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind       text        NOT NULL CHECK (kind IN ('user', 'system')),
    owner      text        NOT NULL CHECK (owner <> ''),
    currency   text        NOT NULL CHECK (currency ~ '^[a-z]{3}$'),
    balance    bigint      NOT NULL DEFAULT 0,
    version    bigint      NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT wallets_kind_owner_currency_key UNIQUE (kind, owner, currency),
    CONSTRAINT wallets_user_balance_non_negative CHECK (kind <> 'user' OR balance >= 0),
    CONSTRAINT wallets_system_balance_derived CHECK (kind = 'user' OR balance = 0)
);

-- One row per money movement. (kind, reference) makes every effect idempotent
-- at the ledger itself: the same PSP event or payout step cannot post twice.
CREATE TABLE ledger_transactions (
    id             uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    kind           text        NOT NULL,
    reference      text        NOT NULL,
    correlation_id text        NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ledger_transactions_kind_reference_key UNIQUE (kind, reference)
);

-- wallet_id deliberately has no foreign key: an FK check takes FOR KEY SHARE
-- on the referenced row, and every credit references the same PSP clearing
-- account, so concurrent credits would pile multixacts onto one hot row. The
-- currency trigger below checks the wallet exists, and wallets are never
-- deleted (trigger wallets_no_delete).
CREATE TABLE ledger_entries (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    transaction_id uuid        NOT NULL REFERENCES ledger_transactions (id),
    wallet_id      bigint      NOT NULL,
    amount         bigint      NOT NULL CHECK (amount <> 0),
    currency       text        NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX ledger_entries_wallet_idx ON ledger_entries (wallet_id, id);
CREATE INDEX ledger_entries_transaction_idx ON ledger_entries (transaction_id);

-- Double entry, enforced by the database: at commit, every transaction that
-- received entries must sum to zero per currency, and every entry's wallet must
-- be in the entry's currency.
CREATE FUNCTION ledger_check_transaction_balanced() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    unbalanced text;
BEGIN
    SELECT string_agg(e.currency || ':' || s, ',') INTO unbalanced
    FROM (
        SELECT currency, sum(amount) AS s
        FROM ledger_entries
        WHERE transaction_id = NEW.transaction_id
        GROUP BY currency
        HAVING sum(amount) <> 0
    ) e;
    IF unbalanced IS NOT NULL THEN
        RAISE EXCEPTION 'ledger transaction % does not sum to zero (%)', NEW.transaction_id, unbalanced
            USING ERRCODE = '23514', CONSTRAINT = 'ledger_transaction_balanced';
    END IF;
    RETURN NULL;
END;
$$;

CREATE CONSTRAINT TRIGGER ledger_entries_balanced
    AFTER INSERT ON ledger_entries
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION ledger_check_transaction_balanced();

CREATE FUNCTION ledger_check_entry_currency() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM wallets w WHERE w.id = NEW.wallet_id AND w.currency = NEW.currency) THEN
        RAISE EXCEPTION 'ledger entry currency % does not match wallet %', NEW.currency, NEW.wallet_id
            USING ERRCODE = '23514', CONSTRAINT = 'ledger_entry_currency';
    END IF;
    RETURN NEW;
END;
$$;

CREATE TRIGGER ledger_entries_currency
    BEFORE INSERT ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_check_entry_currency();

-- Ledger history is append-only.
CREATE FUNCTION ledger_forbid_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = '42501';
END;
$$;

CREATE TRIGGER ledger_entries_append_only
    BEFORE UPDATE OR DELETE ON ledger_entries
    FOR EACH ROW EXECUTE FUNCTION ledger_forbid_change();

CREATE TRIGGER ledger_transactions_append_only
    BEFORE UPDATE OR DELETE ON ledger_transactions
    FOR EACH ROW EXECUTE FUNCTION ledger_forbid_change();

CREATE TRIGGER wallets_no_delete
    BEFORE DELETE ON wallets
    FOR EACH ROW EXECUTE FUNCTION ledger_forbid_change();

-- Payout requests and their state machine (docs/design/architecture.md). (client_id,
-- idempotency_key) is unique: a client's retried request finds its payout.
CREATE TABLE payouts (
    id              uuid        PRIMARY KEY,
    client_id       text        NOT NULL,
    idempotency_key text        NOT NULL CHECK (idempotency_key <> ''),
    request_hash    text        NOT NULL,
    user_id         text        NOT NULL CHECK (user_id <> ''),
    amount          bigint      NOT NULL CHECK (amount > 0),
    currency        text        NOT NULL CHECK (currency ~ '^[a-z]{3}$'),
    destination     text        NOT NULL CHECK (destination <> ''),
    provider        text        NOT NULL CHECK (provider IN ('stripe', 'paystack')),
    status          text        NOT NULL DEFAULT 'INITIALIZED'
                    CHECK (status IN ('INITIALIZED', 'SENDING_TO_GATEWAY', 'SENT_TO_GATEWAY',
                                      'AWAITING_RESPONSE', 'SUCCEEDED', 'RETRYING', 'FAILED',
                                      'NEEDS_REVIEW', 'FINALIZED')),
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    psp_reference   text,
    psp_status      text,
    psp_updated_at  timestamptz,
    last_error      text,
    error_class     text,
    correlation_id  text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT payouts_client_idempotency_key UNIQUE (client_id, idempotency_key)
);

CREATE INDEX payouts_user_idx ON payouts (user_id, created_at DESC);
CREATE INDEX payouts_status_idx ON payouts (status, updated_at)
    WHERE status NOT IN ('SUCCEEDED', 'FINALIZED');

-- Every transition and every PSP attempt of a payout, append-only.
CREATE TABLE payout_transitions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    payout_id   uuid        NOT NULL REFERENCES payouts (id),
    from_status text,
    to_status   text        NOT NULL,
    attempt     integer     NOT NULL DEFAULT 0,
    error       text,
    error_class text,
    detail      jsonb,
    at          timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX payout_transitions_payout_idx ON payout_transitions (payout_id, id);

-- A consumer's idempotency record, written in the same transaction as the effect.
CREATE TABLE processed_events (
    consumer_group text        NOT NULL,
    event_id       text        NOT NULL,
    processed_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer_group, event_id)
);

-- Dead letters from ingest (a verified event we cannot act on, such as a
-- payment without metadata.user_id), from the relay (Kafka unreachable for
-- good) and from consumers (retries spent, permanent errors, poison
-- messages). Nothing is deleted.
CREATE TABLE dead_letters (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source             text        NOT NULL CHECK (source IN ('ingest', 'relay', 'consumer')),
    original_topic     text        NOT NULL,
    original_partition integer,
    original_offset    bigint,
    consumer_group     text,
    outbox_id          bigint,
    partition_key      text        NOT NULL DEFAULT '',
    event_type         text        NOT NULL DEFAULT '',
    payload            bytea       NOT NULL,
    headers            jsonb       NOT NULL DEFAULT '{}'::jsonb,
    error              text        NOT NULL,
    error_class        text        NOT NULL,
    retry_count        integer     NOT NULL DEFAULT 0,
    retry_history      jsonb       NOT NULL DEFAULT '[]'::jsonb,
    first_failure_at   timestamptz NOT NULL DEFAULT now(),
    failed_at          timestamptz NOT NULL DEFAULT now(),
    correlation_id     text        NOT NULL DEFAULT '',
    status             text        NOT NULL DEFAULT 'open'
                       CHECK (status IN ('open', 'replayed', 'discarded')),
    replay_count       integer     NOT NULL DEFAULT 0,
    replay_outbox_id   bigint,
    resolved_by        text,
    resolved_at        timestamptz,
    resolution_reason  text,
    dlq_topic          text,
    dlq_partition      integer,
    dlq_offset         bigint,
    created_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT dead_letters_resolution CHECK ((status = 'open') = (resolved_at IS NULL))
);

-- A consumer-side dead letter is identified by the record that failed; a
-- relay-side one by its outbox row. Either makes re-delivery idempotent.
CREATE UNIQUE INDEX dead_letters_origin_key
    ON dead_letters (original_topic, original_partition, original_offset)
    WHERE source = 'consumer';
CREATE UNIQUE INDEX dead_letters_outbox_key
    ON dead_letters (outbox_id)
    WHERE source = 'relay';
-- Where dlq-admin read a letter from Kafka: dedupes letters whose origin
-- headers are unusable when their record is delivered twice.
CREATE UNIQUE INDEX dead_letters_dlq_record_key
    ON dead_letters (dlq_topic, dlq_partition, dlq_offset)
    WHERE dlq_topic IS NOT NULL;

CREATE INDEX dead_letters_list_idx ON dead_letters (id DESC);
CREATE INDEX dead_letters_open_idx ON dead_letters (original_topic, failed_at) WHERE status = 'open';

-- Every operator action, with who did it and why.
CREATE TABLE audit_log (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    actor       text        NOT NULL,
    action      text        NOT NULL,
    target_type text        NOT NULL,
    target_id   text        NOT NULL,
    reason      text,
    detail      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    at          timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX audit_log_target_idx ON audit_log (target_type, target_id, at);
