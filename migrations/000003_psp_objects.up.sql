-- The latest state Aegis has seen of each PSP object (a payment intent, a
-- charge, a payout, a transfer). PSPs do not deliver in order: a payout.failed
-- can overtake a retried payout.paid, and an old event can be replayed days
-- later. Ingest records every event's object time here and marks an event
-- older than what was already seen as stale, so it is stored (and published
-- for the record) but can never move money backwards.
SET lock_timeout = '5s';

CREATE TABLE psp_objects (
    provider      text        NOT NULL,
    object_id     text        NOT NULL,
    status        text,
    event_type    text        NOT NULL,
    event_id      text        NOT NULL,
    occurred_at   timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, object_id)
);
