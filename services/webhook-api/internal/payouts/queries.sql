-- The SQL of the payouts store (create, get, cancel), compiled by sqlc into
-- package sqlcdb.

-- name: InsertPayout :one
-- No row back: a concurrent request with the key committed first.
INSERT INTO payouts (id, client_id, idempotency_key, request_hash, user_id, amount, currency, destination,
                     provider, correlation_id, destination_id)
VALUES (@id, @client_id, @idempotency_key, @request_hash, @user_id, @amount, @currency, @destination,
        @provider, @correlation_id, @destination_id)
ON CONFLICT (client_id, idempotency_key) DO NOTHING
RETURNING id;

-- name: InsertFirstTransition :exec
-- to_status: payoutstate.Initialized.
INSERT INTO payout_transitions (payout_id, from_status, to_status, attempt) VALUES (@payout_id, NULL, @to_status::text, 0);

-- name: ByKey :one
SELECT id, request_hash FROM payouts WHERE client_id = @client_id AND idempotency_key = @idempotency_key;

-- name: LockDaily :exec
-- Serializes the daily-limit check of one user and currency: two concurrent
-- payouts cannot both fit under the limit by not seeing each other.
-- Transaction-scoped, released at commit.
SELECT pg_advisory_xact_lock(hashtextextended('payout-daily:' || @user_id::text || ':' || @currency::text, 0));

-- name: PaidOutDaily :one
-- What the user was paid out in the currency over the last 24 hours,
-- counting every accepted payout that did not fail (payouts_user_idx);
-- unpaid: the states of a payout that ended without paying out
-- (payoutstate.Status.Unpaid).
SELECT coalesce(sum(amount), 0)::bigint AS paid_out FROM payouts
WHERE user_id = @user_id AND currency = @currency AND created_at > now() - interval '24 hours'
  AND status <> ALL(@unpaid::text[]);

-- name: GetPayout :one
SELECT id, status, user_id, amount, currency, destination, coalesce(destination_id::text, '')::text AS destination_id,
       provider, attempts, coalesce(psp_reference, '')::text AS psp_reference, coalesce(last_error, '')::text AS last_error,
       coalesce(error_class, '')::text AS error_class, created_at, updated_at
FROM payouts WHERE id = @id;

-- name: History :many
SELECT coalesce(from_status, '')::text AS from_status, to_status, attempt, coalesce(error, '')::text AS error,
       coalesce(error_class, '')::text AS error_class, at
FROM payout_transitions WHERE payout_id = @payout_id ORDER BY id;

-- name: PSPRequests :many
SELECT attempt, kind, coalesce(idempotency_key, '')::text AS idempotency_key, outcome,
       coalesce(psp_reference, '')::text AS psp_reference, coalesce(error, '')::text AS error, at
FROM payout_attempts_for_api WHERE payout_id = @payout_id ORDER BY id;

-- name: Evidence :many
SELECT provider, event_id, event_type, coalesce(amount, 0)::bigint AS amount, coalesce(currency, '')::text AS currency,
       coalesce(psp_reference, '')::text AS psp_reference, verdict, coalesce(reason, '')::text AS reason, at
FROM payout_evidence_for_api WHERE payout_id = @payout_id ORDER BY id;

-- name: LockForCancel :one
-- Only a payout nobody has taken up yet is canceled, under its row lock
-- (the worker's first step takes the same lock).
SELECT status, user_id, amount, currency, provider, correlation_id, coalesce(error_class, '')::text AS error_class
FROM payouts WHERE id = @id FOR UPDATE;

-- name: Cancel :exec
-- From payoutstate.Initialized (cancelable) to payoutstate.Finalized.
UPDATE payouts SET status = @to_status::text, last_error = @reason::text, error_class = 'canceled', updated_at = now()
WHERE id = @id AND status = @from_status::text;

-- name: CancelTransitions :exec
-- from_status -> failed (with the reason) -> to_status, as the worker's
-- state machine records a failure.
INSERT INTO payout_transitions (payout_id, from_status, to_status, attempt, error, error_class)
VALUES (@payout_id, @from_status::text, @failed::text, 0, @reason::text, 'canceled'),
       (@payout_id, @failed::text, @to_status::text, 0, NULL, NULL);

-- name: LockNewDestination :exec
-- Serializes the cooling-off check of one destination: two concurrent
-- payouts to a new destination cannot both fit under its cap by not seeing
-- each other. Transaction-scoped, released at commit. (Not a row lock:
-- Resolve holds the destination FOR SHARE, and two payouts upgrading their
-- shares would deadlock.)
SELECT pg_advisory_xact_lock(hashtextextended('payout-new-destination:' || @destination_id::text, 0));

-- name: NewDestinationPaid :one
-- When the destination was registered, and what its payouts in the currency
-- that did not fail add up to (payouts_user_idx: a destination has one user).
SELECT d.created_at,
       (SELECT coalesce(sum(p.amount), 0) FROM payouts p
        WHERE p.user_id = d.user_id AND p.destination_id = d.id AND p.currency = @currency
          AND p.status <> ALL(@unpaid::text[]))::bigint AS paid
FROM destinations d WHERE d.id = @destination_id;
