-- PSP reconciliation disagreements that persist: each one is kept
-- across runs with when it was first and last seen and when it cleared, so
-- that dlq-admin pages once for a new disagreement, not on every run, and
-- shows the open ones until they go away; see docs/operations/reconciliation.md.
SET lock_timeout = '5s';

-- Written by webhook-api when it finishes a run (in the run's transaction);
-- read by dlq-admin (GET /v1/psp-reconciliation). subject is what the
-- disagreement is about: our payout id, or the PSP object's id when there
-- is no payout (return_not_posted). At most one open row per
-- (provider, kind, subject): a disagreement seen again is the same row.
CREATE TABLE psp_disagreements (
    id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider       text        NOT NULL CHECK (provider IN ('stripe', 'paystack')),
    kind           text        NOT NULL,
    subject        text        NOT NULL CHECK (subject <> ''),
    payout_id      text,
    psp_object_id  text,
    psp_status     text,
    ledger_status  text,
    event_id       text,
    detail         text        NOT NULL,
    first_seen_run bigint      NOT NULL REFERENCES psp_reconciliation_runs (id),
    first_seen_at  timestamptz NOT NULL DEFAULT now(),
    last_seen_run  bigint      NOT NULL REFERENCES psp_reconciliation_runs (id),
    last_seen_at   timestamptz NOT NULL DEFAULT now(),
    cleared_run    bigint      REFERENCES psp_reconciliation_runs (id),
    cleared_at     timestamptz,
    CONSTRAINT psp_disagreements_cleared CHECK ((cleared_run IS NULL) = (cleared_at IS NULL))
);
CREATE UNIQUE INDEX psp_disagreements_one_open ON psp_disagreements (provider, kind, subject) WHERE cleared_at IS NULL;
CREATE INDEX psp_disagreements_cleared_run_idx ON psp_disagreements (cleared_run) WHERE cleared_run IS NOT NULL;

-- Per run: how many of its disagreements were new, still open from an
-- earlier run, and how many earlier ones it found gone.
ALTER TABLE psp_reconciliation_runs
    ADD COLUMN disagreements_new     integer NOT NULL DEFAULT 0,
    ADD COLUMN disagreements_open    integer NOT NULL DEFAULT 0,
    ADD COLUMN disagreements_cleared integer NOT NULL DEFAULT 0;
-- Runs finished before this migration and not alerted yet still page.
UPDATE psp_reconciliation_runs SET disagreements_new = disagreement_count
WHERE finished_at IS NOT NULL AND alerted_at IS NULL;

-- dlq-admin's alert watcher: a page for new disagreements, a notice for
-- cleared ones, an error for a failed run.
DROP INDEX psp_reconciliation_runs_unalerted_idx;
CREATE INDEX psp_reconciliation_runs_unalerted_idx ON psp_reconciliation_runs (id)
    WHERE (disagreements_new > 0 OR disagreements_cleared > 0 OR status = 'failed') AND alerted_at IS NULL AND finished_at IS NOT NULL;
