-- Outbound events (aegis.settlements) are delivered to endpoints, not to one
-- URL: each event is stored once as a message, fanned out to one delivery
-- per enabled endpoint that wants its type, and each delivery is retried on
-- its own schedule (about 27 h by default), every attempt logged.
--
-- Writers: dlq-admin owns the endpoints (operators manage them); outbox-relay
-- owns messages, deliveries, attempts, the per-user sequences and each
-- endpoint's health. Each reads the other's tables through a view; the two
-- writes that cross (the relay disabling a failing endpoint, an operator
-- re-sending or recovering deliveries) are functions below.
-- Expand only: new tables, nothing the previous release reads changes.
SET lock_timeout = '5s';

CREATE TABLE outbound_endpoints (
    id                       uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    url                      text NOT NULL CHECK (url <> '' AND octet_length(url) <= 2048),
    description              text NOT NULL DEFAULT '' CHECK (octet_length(description) <= 1024),
    -- The event types it wants: exact types or a prefix wildcard ('payout.*');
    -- empty wants every type.
    event_types              text[] NOT NULL DEFAULT '{}',
    -- Deliveries per second at most, across every relay; NULL: no limit.
    rate_limit               integer CHECK (rate_limit IS NULL OR rate_limit > 0),
    -- whsec_<base64>: deliveries are signed with it and, until
    -- previous_secret_expires_at, also with previous_secret (rotation).
    secret                   text NOT NULL CHECK (secret LIKE 'whsec\_%'),
    previous_secret          text CHECK (previous_secret IS NULL OR previous_secret LIKE 'whsec\_%'),
    previous_secret_expires_at timestamptz,
    -- Set during a transition from the legacy Aegis-Signature scheme: the
    -- deliveries also carry Aegis-Signature under this key.
    legacy_secret            text CHECK (legacy_secret IS NULL OR octet_length(legacy_secret) >= 16),
    enabled                  boolean NOT NULL DEFAULT true,
    -- When it was last created or enabled: a failing streak counts from here.
    enabled_at               timestamptz NOT NULL DEFAULT now(),
    disabled_at              timestamptz,
    disabled_by              text,
    disabled_reason          text,
    deleted_at               timestamptz,
    created_by               text NOT NULL,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now(),
    CHECK ((previous_secret IS NULL) = (previous_secret_expires_at IS NULL)),
    CHECK (enabled OR disabled_at IS NOT NULL)
);

-- Per user, the sequence number of the last event delivered outbound:
-- every event carries the next one, so a receiver can order and find gaps.
CREATE TABLE outbound_user_sequences (
    user_id text PRIMARY KEY,
    last    bigint NOT NULL CHECK (last > 0)
);

-- One per event (event_id unique): the exact body every endpoint receives.
CREATE TABLE outbound_messages (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id     text NOT NULL UNIQUE CHECK (event_id <> ''),
    event_type   text NOT NULL,
    user_id      text NOT NULL,
    sequence     bigint NOT NULL CHECK (sequence > 0),
    occurred_at  timestamptz NOT NULL,
    body         bytea NOT NULL,
    -- W3C traceparent of the event's trace (its Kafka headers), if any.
    traceparent  text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (user_id, sequence)
);
CREATE INDEX outbound_messages_created_at ON outbound_messages (created_at);

-- One per message and endpoint. pending: due at next_attempt_at (a claim
-- moves it past its lease, so a relay that dies mid-attempt leaves it due
-- again); succeeded; failed (final answer or schedule exhausted; re-sendable).
CREATE TABLE outbound_deliveries (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    message_id      bigint NOT NULL REFERENCES outbound_messages (id) ON DELETE CASCADE,
    endpoint_id     uuid NOT NULL REFERENCES outbound_endpoints (id),
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'succeeded', 'failed')),
    attempts        integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_attempt_at timestamptz,
    last_status     integer,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    UNIQUE (endpoint_id, message_id),
    CHECK ((state = 'pending') = (finished_at IS NULL))
);
CREATE INDEX outbound_deliveries_due ON outbound_deliveries (endpoint_id, next_attempt_at) WHERE state = 'pending';
CREATE INDEX outbound_deliveries_message ON outbound_deliveries (message_id);
CREATE INDEX outbound_deliveries_finished ON outbound_deliveries (finished_at) WHERE state <> 'pending';

-- The delivery log: every attempt.
CREATE TABLE outbound_attempts (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id   bigint NOT NULL REFERENCES outbound_deliveries (id) ON DELETE CASCADE,
    message_id    bigint NOT NULL,
    endpoint_id   uuid NOT NULL,
    attempt       integer NOT NULL CHECK (attempt > 0),
    attempted_at  timestamptz NOT NULL,
    -- delivered; retry (another attempt is scheduled); failed (final).
    outcome       text NOT NULL CHECK (outcome IN ('delivered', 'retry', 'failed')),
    status_code   integer,
    latency_ms    integer NOT NULL CHECK (latency_ms >= 0),
    -- The receiver's answer, its first 1 KiB.
    response_body text,
    error         text
);
CREATE INDEX outbound_attempts_delivery ON outbound_attempts (delivery_id, attempt);
CREATE INDEX outbound_attempts_endpoint ON outbound_attempts (endpoint_id, attempted_at DESC);
CREATE INDEX outbound_attempts_message ON outbound_attempts (message_id);
CREATE INDEX outbound_attempts_attempted_at ON outbound_attempts (attempted_at);

-- Each endpoint's health as the relays see it, and its rate limit's bucket.
CREATE TABLE outbound_endpoint_health (
    endpoint_id     uuid PRIMARY KEY REFERENCES outbound_endpoints (id),
    -- The first failed attempt since the last success; NULL while healthy.
    failing_since   timestamptz,
    last_success_at timestamptz,
    last_failure_at timestamptz,
    tokens          double precision NOT NULL DEFAULT 0,
    tokens_at       timestamptz NOT NULL DEFAULT now()
);

-- What the relay reads of an endpoint (its secrets to sign with).
CREATE VIEW outbound_endpoints_for_relay AS
SELECT id, url, event_types, rate_limit, secret, previous_secret, previous_secret_expires_at, legacy_secret,
       enabled, enabled_at, deleted_at
FROM outbound_endpoints;

-- What dlq-admin reads of the relay's tables.
CREATE VIEW outbound_messages_for_ops AS
SELECT id, event_id, event_type, user_id, sequence, occurred_at, body, created_at FROM outbound_messages;
CREATE VIEW outbound_deliveries_for_ops AS
SELECT id, message_id, endpoint_id, state, attempts, next_attempt_at, last_attempt_at, last_status, last_error,
       created_at, finished_at
FROM outbound_deliveries;
CREATE VIEW outbound_attempts_for_ops AS
SELECT id, delivery_id, message_id, endpoint_id, attempt, attempted_at, outcome, status_code, latency_ms,
       response_body, error
FROM outbound_attempts;
CREATE VIEW outbound_endpoint_health_for_ops AS
SELECT endpoint_id, failing_since, last_success_at, last_failure_at FROM outbound_endpoint_health;

-- The relay disables an endpoint that answered 410 Gone or failed every
-- attempt for its window. True when this call disabled it (so exactly one
-- caller raises the alert).
CREATE FUNCTION disable_outbound_endpoint(p_id uuid, p_reason text)
RETURNS boolean
LANGUAGE sql
SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
    WITH changed AS (
        UPDATE outbound_endpoints
        SET enabled = false, disabled_at = now(), disabled_by = 'outbox-relay', disabled_reason = p_reason,
            updated_at = now()
        WHERE id = p_id AND enabled AND deleted_at IS NULL
        RETURNING id
    )
    SELECT EXISTS (SELECT 1 FROM changed);
$$;

-- An operator re-sends one delivery (failed or pending): due now, its
-- attempts counted afresh. False when there is no such delivery.
CREATE FUNCTION resend_outbound_delivery(p_id bigint)
RETURNS boolean
LANGUAGE sql
SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
    WITH changed AS (
        UPDATE outbound_deliveries
        SET state = 'pending', attempts = 0, next_attempt_at = now(), finished_at = NULL
        WHERE id = p_id AND state <> 'succeeded'
        RETURNING id
    )
    SELECT EXISTS (SELECT 1 FROM changed);
$$;

-- An operator re-sends one message to one endpoint, whatever its delivery's
-- state (a receiver that lost it). Returns the delivery's id.
CREATE FUNCTION resend_outbound_message(p_message_id bigint, p_endpoint_id uuid)
RETURNS bigint
LANGUAGE sql
SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
    INSERT INTO outbound_deliveries (message_id, endpoint_id)
    VALUES (p_message_id, p_endpoint_id)
    ON CONFLICT (endpoint_id, message_id) DO UPDATE
    SET state = 'pending', attempts = 0, next_attempt_at = now(), finished_at = NULL
    RETURNING id;
$$;

-- "Recover since": every message since p_since that the endpoint wants and
-- did not receive (no delivery, or a failed one) is due again, spaced at
-- p_per_second in message order, so a recovering receiver is not flooded.
-- Returns how many deliveries it scheduled.
CREATE FUNCTION recover_outbound_endpoint(p_endpoint_id uuid, p_since timestamptz, p_per_second integer)
RETURNS bigint
LANGUAGE sql
SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
    WITH ep AS (
        SELECT id, event_types FROM outbound_endpoints WHERE id = p_endpoint_id AND deleted_at IS NULL
    ), wanted AS (
        SELECT m.id, row_number() OVER (ORDER BY m.id) AS n
        FROM outbound_messages m, ep
        WHERE m.created_at >= p_since
          AND (cardinality(ep.event_types) = 0 OR EXISTS (
                SELECT 1 FROM unnest(ep.event_types) t
                WHERE t = m.event_type OR (t LIKE '%.*' AND starts_with(m.event_type, left(t, -1)))))
          AND NOT EXISTS (SELECT 1 FROM outbound_deliveries d
                          WHERE d.endpoint_id = p_endpoint_id AND d.message_id = m.id AND d.state <> 'failed')
    ), scheduled AS (
        INSERT INTO outbound_deliveries (message_id, endpoint_id, next_attempt_at)
        SELECT w.id, p_endpoint_id, now() + (w.n - 1) * interval '1 second' / GREATEST(p_per_second, 1)
        FROM wanted w
        ON CONFLICT (endpoint_id, message_id) DO UPDATE
        SET state = 'pending', attempts = 0, next_attempt_at = EXCLUDED.next_attempt_at, finished_at = NULL
        RETURNING 1
    )
    SELECT count(*) FROM scheduled;
$$;

REVOKE ALL ON FUNCTION disable_outbound_endpoint(uuid, text), resend_outbound_delivery(bigint),
    resend_outbound_message(bigint, uuid), recover_outbound_endpoint(uuid, timestamptz, integer) FROM PUBLIC;

GRANT SELECT, INSERT, UPDATE ON outbound_endpoints TO aegis_dlq_admin;
GRANT SELECT ON outbound_messages_for_ops, outbound_deliveries_for_ops, outbound_attempts_for_ops,
    outbound_endpoint_health_for_ops TO aegis_dlq_admin;
GRANT EXECUTE ON FUNCTION resend_outbound_delivery(bigint), resend_outbound_message(bigint, uuid),
    recover_outbound_endpoint(uuid, timestamptz, integer) TO aegis_dlq_admin;

GRANT SELECT ON outbound_endpoints_for_relay TO aegis_outbox_relay;
GRANT SELECT, INSERT, UPDATE, DELETE ON outbound_messages, outbound_deliveries, outbound_attempts,
    outbound_endpoint_health TO aegis_outbox_relay;
GRANT SELECT, INSERT, UPDATE ON outbound_user_sequences TO aegis_outbox_relay;
GRANT EXECUTE ON FUNCTION disable_outbound_endpoint(uuid, text) TO aegis_outbox_relay;
