-- Outbound delivery's SQL (docs/design/outbound.md), compiled by sqlc into
-- package sqlcdb. The relay reads endpoints only through
-- outbound_endpoints_for_relay and changes them only through
-- disable_outbound_endpoint; it owns messages, deliveries, attempts, the
-- per-user sequences and the endpoints' health.

-- The relay's pool runs with synchronous_commit off (outbox.StoreSettings):
-- an intake transaction turns it back on for itself, because its offsets are
-- committed to Kafka right after it and a lost commit would lose the event.
-- name: DurableCommit :exec
SELECT set_config('synchronous_commit', 'on', true);

-- name: MessageExists :one
SELECT EXISTS (SELECT 1 FROM outbound_messages WHERE event_id = @event_id) AS ok;

-- name: NextSequence :one
INSERT INTO outbound_user_sequences (user_id, last) VALUES (@user_id, 1)
ON CONFLICT (user_id) DO UPDATE SET last = outbound_user_sequences.last + 1
RETURNING last;

-- name: InsertMessage :one
INSERT INTO outbound_messages (event_id, event_type, user_id, sequence, occurred_at, body, traceparent)
VALUES (@event_id, @event_type, @user_id, @sequence, @occurred_at, @body, sqlc.narg('traceparent'))
ON CONFLICT (event_id) DO NOTHING
RETURNING id;

-- One pending delivery per enabled, undeleted endpoint whose filter wants
-- the type: outbound.Wants in SQL (as recover_outbound_endpoint spells it).
-- name: FanOut :execrows
INSERT INTO outbound_deliveries (message_id, endpoint_id)
SELECT @message_id::bigint, e.id
FROM outbound_endpoints_for_relay e
WHERE e.enabled AND e.deleted_at IS NULL
  AND (cardinality(e.event_types) = 0 OR EXISTS (
        SELECT 1 FROM unnest(e.event_types) t
        WHERE t = @event_type::text OR (t LIKE '%.*' AND starts_with(@event_type::text, left(t, -1)))))
ON CONFLICT (endpoint_id, message_id) DO NOTHING;

-- The endpoints a dispatcher may claim from now: enabled, undeleted, with a
-- due pending delivery. previous_active says whether the previous secret
-- still signs (the database's clock decides, as for every other time here).
-- name: DueEndpoints :many
SELECT e.id, e.url, e.rate_limit, e.secret, e.previous_secret,
       (e.previous_secret IS NOT NULL AND e.previous_secret_expires_at > now())::boolean AS previous_active,
       e.legacy_secret
FROM outbound_endpoints_for_relay e
WHERE e.enabled AND e.deleted_at IS NULL
  AND EXISTS (SELECT 1 FROM outbound_deliveries d
              WHERE d.endpoint_id = e.id AND d.state = 'pending' AND d.next_attempt_at <= now());

-- name: EnsureHealth :exec
INSERT INTO outbound_endpoint_health (endpoint_id, tokens, tokens_at)
VALUES (@endpoint_id, @tokens::float8, now())
ON CONFLICT (endpoint_id) DO NOTHING;

-- The rate limit's bucket, locked until the claim's commit: it holds at
-- most rate tokens and gains rate per second. Tokens reads the clock after
-- LockHealth took the row (clock_timestamp, not the transaction's start),
-- so replicas that queued on the row each see the time they took it at.
-- name: LockHealth :exec
SELECT 1 FROM outbound_endpoint_health WHERE endpoint_id = @endpoint_id FOR UPDATE;

-- name: Tokens :one
SELECT LEAST(@rate::float8, tokens + GREATEST(0, EXTRACT(EPOCH FROM clock_timestamp() - tokens_at)::float8) * @rate::float8)::float8 AS available,
       clock_timestamp()::timestamptz AS taken_at
FROM outbound_endpoint_health
WHERE endpoint_id = @endpoint_id;

-- name: SpendTokens :exec
UPDATE outbound_endpoint_health SET tokens = @tokens::float8, tokens_at = GREATEST(tokens_at, @taken_at::timestamptz)
WHERE endpoint_id = @endpoint_id;

-- Claims up to n due deliveries of one endpoint: each is this dispatcher's
-- until its lease ends (a dispatcher that dies leaves it due again) and
-- counts one more attempt. The endpoint is checked again under the claim.
-- name: Claim :many
WITH due AS (
    SELECT d.id FROM outbound_deliveries d
    WHERE d.endpoint_id = @endpoint_id AND d.state = 'pending' AND d.next_attempt_at <= now()
      AND EXISTS (SELECT 1 FROM outbound_endpoints_for_relay e
                  WHERE e.id = d.endpoint_id AND e.enabled AND e.deleted_at IS NULL)
    ORDER BY d.next_attempt_at, d.id
    LIMIT @n
    FOR UPDATE OF d SKIP LOCKED
), claimed AS (
    UPDATE outbound_deliveries d
    SET next_attempt_at = now() + make_interval(secs => @lease_seconds::float8), attempts = d.attempts + 1
    FROM due WHERE d.id = due.id
    RETURNING d.id, d.message_id, d.attempts
)
SELECT c.id, c.message_id, c.attempts, m.event_id, m.body, m.traceparent, m.occurred_at
FROM claimed c JOIN outbound_messages m ON m.id = c.message_id;

-- name: InsertAttempt :exec
INSERT INTO outbound_attempts (delivery_id, message_id, endpoint_id, attempt, attempted_at, outcome, status_code,
                               latency_ms, response_body, error)
VALUES (@delivery_id, @message_id, @endpoint_id, @attempt, @attempted_at, @outcome, sqlc.narg('status_code'),
        @latency_ms, sqlc.narg('response_body'), sqlc.narg('error'));

-- The delivery's state after an attempt, only while it is still the claim
-- that made it (an operator's re-send or a claim after the lease changed
-- attempts): a late answer never overwrites newer state.
-- name: SettleDelivery :execrows
UPDATE outbound_deliveries
SET state = @state,
    next_attempt_at = CASE WHEN @state = 'pending' THEN now() + make_interval(secs => @delay_seconds::float8)
                           ELSE next_attempt_at END,
    last_attempt_at = @attempted_at, last_status = sqlc.narg('last_status'), last_error = sqlc.narg('last_error'),
    finished_at = CASE WHEN @state = 'pending' THEN NULL ELSE now() END
WHERE id = @id AND state = 'pending' AND attempts = @attempts;

-- name: HealthSucceeded :exec
INSERT INTO outbound_endpoint_health (endpoint_id, last_success_at) VALUES (@endpoint_id, now())
ON CONFLICT (endpoint_id) DO UPDATE SET failing_since = NULL, last_success_at = now();

-- name: HealthFailed :exec
INSERT INTO outbound_endpoint_health (endpoint_id, failing_since, last_failure_at) VALUES (@endpoint_id, now(), now())
ON CONFLICT (endpoint_id) DO UPDATE
SET failing_since = COALESCE(outbound_endpoint_health.failing_since, now()), last_failure_at = now();

-- name: DisabledEndpoints :many
-- The undeleted endpoints the relay disabled and nobody enabled since, by
-- reason (gone: answered 410, the reason attempt.go's whyGone stores;
-- failing: failed every attempt for the window): aegis_outbound_endpoints_disabled.
SELECT (CASE WHEN disabled_reason = 'answered 410 Gone' THEN 'gone' ELSE 'failing' END)::text AS reason,
       count(*)::bigint AS disabled
FROM outbound_endpoints_for_relay
WHERE NOT enabled AND deleted_at IS NULL AND disabled_by = 'outbox-relay'
GROUP BY 1;

-- name: DisableEndpoint :one
SELECT disable_outbound_endpoint(@id, @reason)::boolean AS disabled;

-- Enabled endpoints that failed every attempt for the window, counted from
-- when they were last enabled if later.
-- name: FailingEndpoints :many
SELECT e.id, e.url
FROM outbound_endpoints_for_relay e
JOIN outbound_endpoint_health h ON h.endpoint_id = e.id
WHERE e.enabled AND e.deleted_at IS NULL AND h.failing_since IS NOT NULL
  AND GREATEST(h.failing_since, e.enabled_at) < now() - make_interval(secs => @window_seconds::float8);

-- name: DeleteOldAttempts :execrows
DELETE FROM outbound_attempts WHERE id IN (
    SELECT id FROM outbound_attempts
    WHERE attempted_at < now() - make_interval(secs => @age_seconds::float8)
    LIMIT @batch);

-- A message goes with its deliveries (and their attempts) once it is old
-- and none of them is pending for an endpoint that still exists (a deleted
-- endpoint's deliveries are never claimed: they must not keep it for ever).
-- name: DeleteOldMessages :execrows
DELETE FROM outbound_messages WHERE id IN (
    SELECT m.id FROM outbound_messages m
    WHERE m.created_at < now() - make_interval(secs => @age_seconds::float8)
      AND NOT EXISTS (SELECT 1 FROM outbound_deliveries d
                      JOIN outbound_endpoints_for_relay e ON e.id = d.endpoint_id AND e.deleted_at IS NULL
                      WHERE d.message_id = m.id AND d.state = 'pending')
    LIMIT @batch);

-- Per undeleted endpoint: pending deliveries and the age of the oldest.
-- name: PendingStats :many
SELECT e.id, count(d.id)::bigint AS pending,
       COALESCE(EXTRACT(EPOCH FROM now() - min(d.created_at)), 0)::float8 AS oldest_seconds
FROM outbound_endpoints_for_relay e
LEFT JOIN outbound_deliveries d ON d.endpoint_id = e.id AND d.state = 'pending'
WHERE e.deleted_at IS NULL
GROUP BY e.id;
