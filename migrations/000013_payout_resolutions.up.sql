-- Ops resolve what machines can't: an operator resolves a
-- NEEDS_REVIEW payout as paid or failed, with a reason and the PSP's object
-- id as evidence. dlq-admin writes the request (this row, its audit_log row
-- and the command on aegis.transactions, in one transaction); payout-worker,
-- which owns payouts and the ledger, applies it or refuses it and writes the
-- verdict back here (status, psp_answer, decided_at) in the transaction that
-- settles or releases the hold. See services/dlq-admin/internal/review/resolution.
SET lock_timeout = '5s';

CREATE TABLE payout_resolutions (
    id            uuid        PRIMARY KEY,
    payout_id     uuid        NOT NULL REFERENCES payouts (id),
    user_id       text        NOT NULL,
    outcome       text        NOT NULL CHECK (outcome IN ('paid', 'failed')),
    reason        text        NOT NULL CHECK (reason <> ''),
    psp_object_id text        NOT NULL CHECK (psp_object_id <> ''),
    requested_by  text        NOT NULL,
    -- awaiting_approval: four-eyes, nothing sent yet; pending: the command
    -- is on its way to payout-worker; applied / refused: the worker's
    -- verdict; rejected: a second operator said no.
    status        text        NOT NULL CHECK (status IN ('awaiting_approval', 'pending', 'applied', 'refused', 'rejected')),
    -- What the PSP's own record said when the worker checked the evidence.
    psp_answer    text,
    approved_by   text,
    outbox_id     bigint,
    created_at    timestamptz NOT NULL DEFAULT now(),
    decided_at    timestamptz
);

CREATE INDEX payout_resolutions_payout_idx ON payout_resolutions (payout_id, created_at DESC);
-- At most one resolution of a payout in flight: a second one waits for the
-- verdict of the first (409).
CREATE UNIQUE INDEX payout_resolutions_open_idx ON payout_resolutions (payout_id)
    WHERE status IN ('awaiting_approval', 'pending');

-- Four-eyes (REQUIRE_SECOND_APPROVER): an action that takes effect only
-- once a different operator approves it. kind payout_resolution targets a
-- payout_resolutions row; bulk_replay keeps the job's request until a job
-- is created from it (result_id).
CREATE TABLE approvals (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind            text        NOT NULL CHECK (kind IN ('payout_resolution', 'bulk_replay')),
    target_id       text        NOT NULL DEFAULT '',
    request         jsonb       NOT NULL DEFAULT '{}'::jsonb,
    summary         text        NOT NULL DEFAULT '',
    requested_by    text        NOT NULL,
    status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
    decided_by      text,
    decision_reason text,
    result_id       text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    decided_at      timestamptz,
    CONSTRAINT approvals_second_person CHECK (decided_by IS NULL OR decided_by <> requested_by)
);

CREATE INDEX approvals_pending_idx ON approvals (id) WHERE status = 'pending';

-- The payouts list: NEEDS_REVIEW first, then oldest first.
CREATE INDEX payouts_status_created_idx ON payouts (status, created_at, id);
