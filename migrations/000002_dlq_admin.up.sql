-- dlq-admin, version 2: alerting on new dead letters, tracked bulk replays
-- and the reconciliation report. See services/dlq-admin (doc.go of
-- internal/deadletter/replay, internal/watch/depth and internal/integrity/recon).

SET lock_timeout = '5s';

-- A dead letter that nobody has been alerted about yet. Rows that exist
-- when this migration runs predate alerting and are not paged about: the
-- column is added with DEFAULT false (a metadata-only change, no table
-- rewrite), and only then does the default become true, so every letter
-- written from now on (by the relay, ingest or dlq-admin's consumer, none of
-- which names the column) starts pending. dlq-admin claims pending rows with
-- FOR UPDATE SKIP LOCKED, raises their alerts and clears the flag.
ALTER TABLE dead_letters ADD COLUMN alert_pending boolean NOT NULL DEFAULT false;
ALTER TABLE dead_letters ALTER COLUMN alert_pending SET DEFAULT true;
CREATE INDEX dead_letters_alert_pending_idx ON dead_letters (id) WHERE alert_pending;

-- Bulk replay walks open letters in id order.
CREATE INDEX dead_letters_open_id_idx ON dead_letters (id) WHERE status = 'open';

-- One bulk replay: who asked, for what, and how far it got. A runner owns a
-- running job while locked_until is in the future and extends it as it
-- works; a running job whose lease ran out (its runner died) is taken over
-- and resumed after cursor_id. Letters are replayed only while open, so a
-- resumed job never replays one twice. upto_id bounds the job to letters
-- that existed when it was created: a replay that fails again makes a new
-- letter, which the same job must not chase.
CREATE TABLE replay_jobs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    actor        text        NOT NULL CHECK (actor <> ''),
    reason       text,
    filter       jsonb       NOT NULL DEFAULT '{}'::jsonb,
    max          integer     NOT NULL CHECK (max > 0),
    upto_id      bigint      NOT NULL DEFAULT 0,
    status       text        NOT NULL DEFAULT 'queued'
                 CHECK (status IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    matched      integer     NOT NULL DEFAULT 0 CHECK (matched >= 0),
    replayed     integer     NOT NULL DEFAULT 0 CHECK (replayed >= 0),
    skipped      integer     NOT NULL DEFAULT 0 CHECK (skipped >= 0),
    failed       integer     NOT NULL DEFAULT 0 CHECK (failed >= 0),
    last_error   text,
    cursor_id    bigint      NOT NULL DEFAULT 0,
    locked_by    text,
    locked_until timestamptz,
    created_at   timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    finished_at  timestamptz,
    CONSTRAINT replay_jobs_attempted_within_max CHECK (replayed + failed <= max),
    CONSTRAINT replay_jobs_finished CHECK ((status IN ('done', 'failed', 'cancelled')) = (finished_at IS NOT NULL))
);

CREATE INDEX replay_jobs_unfinished_idx ON replay_jobs (id) WHERE status IN ('queued', 'running');

-- Every run of the ledger integrity check ("Total Integrity Check").
CREATE TABLE reconciliation_runs (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    ok          boolean     NOT NULL,
    trigger     text        NOT NULL CHECK (trigger IN ('scheduled', 'manual')),
    actor       text,
    summary     jsonb       NOT NULL DEFAULT '{}'::jsonb
);

CREATE INDEX reconciliation_runs_latest_idx ON reconciliation_runs (started_at DESC, id DESC);
