-- PSP outcome events are evidence, not commands; unknown outcomes are never
-- reversed. See services/payout-worker/internal/payout.
SET lock_timeout = '5s';

-- outcome_unknown: some attempt may have executed at the PSP (a timeout, a
-- connection lost after sending, a 5xx). Sticky: once set, a definite
-- failure no longer releases the hold unless the PSP confirms, by a lookup,
-- that no object exists for the payout.
-- lookup_needed: the next attempt looks the object up before sending
-- anything (after an unknown outcome or a 5xx, whose answer Stripe saves
-- under the Idempotency-Key and replays for every retry with that key).
-- psp_key: the Idempotency-Key the next create uses; NULL means the key
-- derived from the payout id (every payout before this migration).
-- first_attempt_at: when the first create was sent, for the PSP's
-- idempotency window.
ALTER TABLE payouts
    ADD COLUMN outcome_unknown  boolean     NOT NULL DEFAULT false,
    ADD COLUMN lookup_needed    boolean     NOT NULL DEFAULT false,
    ADD COLUMN psp_key          text,
    ADD COLUMN first_attempt_at timestamptz;

-- One row per request made to the PSP for a payout: a create (with the
-- Idempotency-Key it carried) or a lookup, and what came of it. A key is
-- only ever used for one payout, and a new key only after a lookup said
-- the PSP has no object for the payout.
CREATE TABLE payout_attempts (
    id              bigserial   PRIMARY KEY,
    payout_id       uuid        NOT NULL REFERENCES payouts (id),
    attempt         integer     NOT NULL,
    kind            text        NOT NULL CHECK (kind IN ('create', 'lookup')),
    idempotency_key text,
    outcome         text        NOT NULL
                    CHECK (outcome IN ('accepted', 'refused', 'not_executed', 'unknown', 'found', 'not_found')),
    psp_reference   text,
    error           text,
    at              timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payout_attempts_payout_idx ON payout_attempts (payout_id, id);

-- Every PSP outcome event about a payout, whatever became of it: applied,
-- refused for not matching the payout (outcome_mismatch), stale, or
-- recorded without effect. It is what GET /v1/payouts/{id} shows as
-- "evidence".
CREATE TABLE payout_evidence (
    id            bigserial   PRIMARY KEY,
    payout_id     uuid        NOT NULL REFERENCES payouts (id),
    provider      text        NOT NULL,
    event_id      text        NOT NULL,
    event_type    text        NOT NULL,
    amount        bigint,
    currency      text,
    psp_reference text,
    verdict       text        NOT NULL CHECK (verdict IN ('applied', 'outcome_mismatch', 'stale', 'recorded')),
    reason        text,
    at            timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payout_evidence_payout_idx ON payout_evidence (payout_id, id);
