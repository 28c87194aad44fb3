-- All SQL of package endpoints, compiled by sqlc into package sqlcdb.
-- outbound_endpoints is dlq-admin's: written here directly. The relay's
-- tables (messages, deliveries, attempts, health) are read only through
-- their *_for_ops views and written only through the relay's functions
-- resend_outbound_delivery, resend_outbound_message and
-- recover_outbound_endpoint (migration 000041). Every statement returning
-- an endpoint returns GetEndpoint's row; its oldest_pending_at means
-- something only when pending > 0 (sqlc cannot type the outer join's NULL:
-- the Go side shows none then).

-- name: GetEndpoint :one
-- An undeleted endpoint with its health and its pending deliveries.
SELECT e.id, e.url, e.description, e.event_types, e.rate_limit, e.enabled, e.enabled_at, e.disabled_at, e.disabled_by,
    e.disabled_reason, e.created_by, e.created_at, e.updated_at, (e.legacy_secret IS NOT NULL)::bool AS has_legacy_secret,
    e.previous_secret_expires_at, h.failing_since, h.last_success_at,
    coalesce(p.pending, 0)::bigint AS pending, coalesce(p.oldest_pending_at, e.created_at)::timestamptz AS oldest_pending_at
FROM outbound_endpoints e
LEFT JOIN outbound_endpoint_health_for_ops h ON h.endpoint_id = e.id
LEFT JOIN (
    SELECT d.endpoint_id, count(*) AS pending, min(d.created_at)::timestamptz AS oldest_pending_at
    FROM outbound_deliveries_for_ops d WHERE d.state = 'pending' GROUP BY d.endpoint_id
) p ON p.endpoint_id = e.id
WHERE e.id = @id AND e.deleted_at IS NULL;

-- name: ListEndpoints :many
-- Every undeleted endpoint, oldest first.
SELECT e.id, e.url, e.description, e.event_types, e.rate_limit, e.enabled, e.enabled_at, e.disabled_at, e.disabled_by,
    e.disabled_reason, e.created_by, e.created_at, e.updated_at, (e.legacy_secret IS NOT NULL)::bool AS has_legacy_secret,
    e.previous_secret_expires_at, h.failing_since, h.last_success_at,
    coalesce(p.pending, 0)::bigint AS pending, coalesce(p.oldest_pending_at, e.created_at)::timestamptz AS oldest_pending_at
FROM outbound_endpoints e
LEFT JOIN outbound_endpoint_health_for_ops h ON h.endpoint_id = e.id
LEFT JOIN (
    SELECT d.endpoint_id, count(*) AS pending, min(d.created_at)::timestamptz AS oldest_pending_at
    FROM outbound_deliveries_for_ops d WHERE d.state = 'pending' GROUP BY d.endpoint_id
) p ON p.endpoint_id = e.id
WHERE e.deleted_at IS NULL
ORDER BY e.created_at, e.id
LIMIT @max_rows;

-- name: LockEndpoint :one
-- An undeleted endpoint's row, secrets included, locked for a change.
SELECT id, url, description, event_types, rate_limit, secret, previous_secret, previous_secret_expires_at,
    legacy_secret, enabled
FROM outbound_endpoints WHERE id = @id AND deleted_at IS NULL FOR UPDATE;

-- name: EndpointSecret :one
SELECT secret, previous_secret_expires_at FROM outbound_endpoints WHERE id = @id AND deleted_at IS NULL;

-- name: CreateEndpoint :one
INSERT INTO outbound_endpoints (url, description, event_types, rate_limit, secret, legacy_secret, created_by)
VALUES (@url, @description, @event_types::text[], sqlc.narg(rate_limit)::integer, @secret, sqlc.narg(legacy_secret)::text,
    @created_by)
RETURNING id;

-- name: UpdateEndpoint :exec
UPDATE outbound_endpoints
SET url = @url, description = @description, event_types = @event_types::text[], rate_limit = sqlc.narg(rate_limit)::integer,
    legacy_secret = sqlc.narg(legacy_secret)::text, updated_at = now()
WHERE id = @id;

-- name: RotateSecret :one
-- The new secret signs at once; the current one keeps signing until
-- the overlap has passed (a rotation inside an overlap drops the oldest).
UPDATE outbound_endpoints
SET previous_secret = secret, previous_secret_expires_at = now() + make_interval(secs => @overlap_seconds::float8),
    secret = @secret::text, updated_at = now()
WHERE id = @id
RETURNING previous_secret_expires_at;

-- name: DisableEndpoint :one
UPDATE outbound_endpoints
SET enabled = false, disabled_at = now(), disabled_by = @actor::text, disabled_reason = @reason::text, updated_at = now()
WHERE id = @id
RETURNING updated_at;

-- name: EnableEndpoint :one
-- Its waiting deliveries resume; the failing streak counts from now.
UPDATE outbound_endpoints
SET enabled = true, enabled_at = now(), disabled_at = NULL, disabled_by = NULL, disabled_reason = NULL, updated_at = now()
WHERE id = @id
RETURNING updated_at;

-- name: DeleteEndpoint :one
-- Soft: nothing new is delivered to it, nothing claimed; its log stays.
UPDATE outbound_endpoints
SET deleted_at = now(), enabled = false, disabled_at = coalesce(disabled_at, now()), disabled_by = @actor::text,
    disabled_reason = 'deleted', updated_at = now()
WHERE id = @id
RETURNING updated_at;

-- name: Recover :one
SELECT recover_outbound_endpoint(@endpoint_id::uuid, @since::timestamptz, @per_second::integer)::bigint AS scheduled;

-- name: ResendDelivery :one
SELECT resend_outbound_delivery(@id::bigint)::bool AS resent;

-- name: ResendMessage :one
SELECT resend_outbound_message(@message_id::bigint, @endpoint_id::uuid)::bigint AS delivery_id;

-- name: GetDelivery :one
SELECT id, message_id, endpoint_id, state, attempts, next_attempt_at, last_attempt_at, last_status, last_error, created_at,
    finished_at
FROM outbound_deliveries_for_ops WHERE id = @id;

-- name: EndpointDeliveries :many
-- An endpoint's deliveries (of one state, or all when the state is ''), newest
-- first, below before_id (0: from the newest).
SELECT id, message_id, endpoint_id, state, attempts, next_attempt_at, last_attempt_at, last_status, last_error, created_at,
    finished_at
FROM outbound_deliveries_for_ops
WHERE endpoint_id = @endpoint_id AND (@state::text = '' OR state = @state::text)
  AND (@before_id::bigint = 0 OR id < @before_id::bigint)
ORDER BY id DESC
LIMIT @max_rows;

-- name: MessageDeliveries :many
SELECT id, message_id, endpoint_id, state, attempts, next_attempt_at, last_attempt_at, last_status, last_error, created_at,
    finished_at
FROM outbound_deliveries_for_ops WHERE message_id = @message_id ORDER BY id;

-- name: EndpointAttempts :many
-- An endpoint's delivery log, newest first, below before_id.
SELECT id, delivery_id, message_id, endpoint_id, attempt, attempted_at, outcome, status_code, latency_ms, response_body, error
FROM outbound_attempts_for_ops
WHERE endpoint_id = @endpoint_id AND (@before_id::bigint = 0 OR id < @before_id::bigint)
ORDER BY id DESC
LIMIT @max_rows;

-- name: MessageAttempts :many
SELECT id, delivery_id, message_id, endpoint_id, attempt, attempted_at, outcome, status_code, latency_ms, response_body, error
FROM outbound_attempts_for_ops WHERE message_id = @message_id ORDER BY id;

-- name: ListMessages :many
-- Messages newest first, below before_id, filtered by whichever of user,
-- type and event id is not ''.
SELECT id, event_id, event_type, user_id, sequence, occurred_at, created_at, body
FROM outbound_messages_for_ops
WHERE (@user_id::text = '' OR user_id = @user_id::text)
  AND (@event_type::text = '' OR event_type = @event_type::text)
  AND (@event_id::text = '' OR event_id = @event_id::text)
  AND (@before_id::bigint = 0 OR id < @before_id::bigint)
ORDER BY id DESC
LIMIT @max_rows;

-- name: GetMessage :one
SELECT id, event_id, event_type, user_id, sequence, occurred_at, created_at, body
FROM outbound_messages_for_ops WHERE id = @id;
