-- River's job table, as far as our queries read it. River's own migrations
-- create it (migrations.Up applies them before ours); this file is read only
-- by sqlc (sqlc.yaml), so that a store's statement that looks at a run's
-- River job is compiled and checked like the rest.
CREATE TYPE river_job_state AS ENUM ('available', 'cancelled', 'completed', 'discarded', 'pending', 'retryable', 'running', 'scheduled');

CREATE TABLE river_job (
    id bigserial PRIMARY KEY,
    state river_job_state NOT NULL DEFAULT 'available',
    args jsonb NOT NULL,
    kind text NOT NULL,
    queue text NOT NULL DEFAULT 'default'
);
