-- PSP reconciliation (missed events): webhook-api pulls the
-- PSPs' own record of events and objects for a window and puts every event
-- through the webhook path; see docs/operations/reconciliation.md.
SET lock_timeout = '5s';

-- One row per run, requested by the schedule (webhook-api) or an operator
-- (dlq-admin POST /v1/psp-reconciliation) and worked by webhook-api, which
-- owns the inbound tables the run writes. The partial unique index keeps at
-- most one run requested or running at a time: a second request is a
-- unique violation (the API's 409). A running run holds a lease that its
-- worker renews; a run whose worker died is taken over when it lapses.
CREATE TABLE psp_reconciliation_runs (
    id                 bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    status             text        NOT NULL DEFAULT 'requested'
                       CHECK (status IN ('requested', 'running', 'succeeded', 'failed')),
    trigger            text        NOT NULL CHECK (trigger IN ('scheduled', 'manual')),
    requested_by       text,
    requested_at       timestamptz NOT NULL DEFAULT now(),
    started_at         timestamptz,
    finished_at        timestamptz,
    locked_by          text,
    lease_until        timestamptz,
    attempts           integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    events_found       integer     NOT NULL DEFAULT 0,
    events_recovered   integer     NOT NULL DEFAULT 0,
    events_present     integer     NOT NULL DEFAULT 0,
    disagreement_count integer     NOT NULL DEFAULT 0,
    -- per provider: window, counts, errors; and every disagreement found
    report             jsonb       NOT NULL DEFAULT '{}',
    disagreements      jsonb       NOT NULL DEFAULT '[]',
    error              text,
    -- set by dlq-admin when it has alerted on the run's disagreements
    alerted_at         timestamptz,
    CONSTRAINT psp_reconciliation_runs_finished CHECK ((status IN ('succeeded', 'failed')) = (finished_at IS NOT NULL))
);

CREATE UNIQUE INDEX psp_reconciliation_runs_one_active ON psp_reconciliation_runs ((true))
    WHERE status IN ('requested', 'running');
CREATE INDEX psp_reconciliation_runs_requested_idx ON psp_reconciliation_runs (requested_at DESC);
-- dlq-admin's alert watcher: finished runs with something to alert on.
CREATE INDEX psp_reconciliation_runs_unalerted_idx ON psp_reconciliation_runs (id)
    WHERE (disagreement_count > 0 OR status = 'failed') AND alerted_at IS NULL AND finished_at IS NOT NULL;

-- Per provider, how far the PSP's record has been read: the next run starts
-- at synced_until minus the overlap.
CREATE TABLE psp_reconciliation_cursors (
    provider      text        PRIMARY KEY CHECK (provider IN ('stripe', 'paystack')),
    synced_until  timestamptz NOT NULL,
    last_event_id text,
    run_id        bigint      REFERENCES psp_reconciliation_runs (id),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
