-- payout-worker's verdict on an operator's resolution moves to a table of
-- its own, written in the transaction of the ledger posting it decides, so
-- that payout_resolutions has one writer, dlq-admin (the request, its
-- approval and its closing). Expand step: the previous worker still
-- UPDATEs payout_resolutions during the rollout, so its grants there stay;
-- the next release's contract migration revokes them (docs/operations/
-- deploy.md, "Pending contract"; migrations/contract.go, ContractNext).
SET lock_timeout = '5s';

CREATE TABLE resolution_verdicts (
    resolution_id uuid        PRIMARY KEY REFERENCES payout_resolutions (id),
    -- applied: the hold was settled or released; refused: nothing moved.
    status        text        NOT NULL CHECK (status IN ('applied', 'refused')),
    -- What the PSP's own record said when the worker checked the evidence
    -- (and, refused, why).
    psp_answer    text        NOT NULL,
    decided_at    timestamptz NOT NULL
);

-- The verdicts the previous worker wrote on payout_resolutions, so that the
-- history survives the contract. Verdicts it writes during the rollout stay
-- there; payout_resolutions_state reads both.
INSERT INTO resolution_verdicts (resolution_id, status, psp_answer, decided_at)
SELECT id, status, coalesce(psp_answer, ''), coalesce(decided_at, created_at)
FROM payout_resolutions
WHERE status IN ('applied', 'refused')
ON CONFLICT (resolution_id) DO NOTHING;

GRANT SELECT, INSERT ON resolution_verdicts TO aegis_payout_worker;

-- dlq-admin reads the worker's verdicts through this view (as 000030's).
CREATE VIEW resolution_verdicts_for_ops AS
SELECT resolution_id, status, psp_answer, decided_at
FROM resolution_verdicts;

-- A resolution as operators, the API and the worker see it: dlq-admin's
-- request with the worker's verdict. The one definition of a resolution's
-- status, psp_answer and decided_at.
--
-- The verdict comes first: coalesce(v, r). payout_resolutions.status is
-- never NULL: it stays pending under a verdict of this release's worker
-- (dlq-admin closes it only when it records the payout's next
-- resolution), so r first would show every new verdict as pending. Without
-- a verdict row, payout_resolutions speaks: dlq-admin's own states
-- (awaiting_approval, pending, rejected) and the verdict of the previous
-- worker, which writes there during the rollout and never here. A
-- verdict's psp_answer and decided_at are NOT NULL, so each column comes
-- from the same row as the status.
--
-- Both hold a verdict when dlq-admin closed the row (the same status) or
-- when a worker of each release decided the same resolution during the
-- rollout: the previous worker does not read this table, so it may decide a
-- resolution this release's worker already refused. Both decide under the
-- payout's row lock and apply only a NEEDS_REVIEW payout, so at most one of
-- them applied; an applied verdict moved money and is the one shown (the
-- join leaves out a refused verdict under the previous worker's applied).
CREATE VIEW payout_resolutions_state AS
SELECT r.id, r.payout_id, r.user_id, r.outcome, r.reason, r.psp_object_id, r.requested_by,
       coalesce(v.status, r.status) AS status, coalesce(v.psp_answer, r.psp_answer) AS psp_answer,
       r.approved_by, r.outbox_id, r.created_at, coalesce(v.decided_at, r.decided_at) AS decided_at
FROM payout_resolutions r
LEFT JOIN resolution_verdicts_for_ops v ON v.resolution_id = r.id AND (r.status <> 'applied' OR v.status = 'applied');

-- payout-worker reads the requests it decides through this view: the
-- columns it needs, with the status above (decided or not).
CREATE VIEW payout_resolutions_for_worker AS
SELECT id, payout_id, outcome, reason, psp_object_id, requested_by, approved_by, status
FROM payout_resolutions_state;

GRANT SELECT ON resolution_verdicts_for_ops, payout_resolutions_state TO aegis_dlq_admin;
GRANT SELECT ON payout_resolutions_for_worker TO aegis_payout_worker;
