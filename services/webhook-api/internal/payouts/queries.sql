-- The SQL of the payouts store (create, get, cancel), compiled by sqlc into
-- package sqlcdb. A payout's rows are payout-worker's: creation and cancel
-- go through the functions its migration defines (create_payout,
-- cancel_payout), and every read through its tables' _for_api views.

-- name: CreatePayout :one
-- The INITIALIZED payout and its first transition (payout-worker's
-- create_payout). No row back: a concurrent request with the key committed
-- first.
SELECT id FROM create_payout(@id, @client_id, @idempotency_key, @request_hash, @user_id, @amount, @currency,
                             @destination, @provider, @correlation_id, @destination_id);

-- name: ByKey :one
SELECT id, request_hash FROM payouts_for_api WHERE client_id = @client_id AND idempotency_key = @idempotency_key;

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
SELECT coalesce(sum(amount), 0)::bigint AS paid_out FROM payouts_for_api
WHERE user_id = @user_id AND currency = @currency AND created_at > now() - interval '24 hours'
  AND status <> ALL(@unpaid::text[]);

-- name: GetPayout :one
SELECT id, status, user_id, amount, currency, destination, coalesce(destination_id::text, '')::text AS destination_id,
       provider, attempts, coalesce(psp_reference, '')::text AS psp_reference,
       coalesce(external_account, '')::text AS external_account, coalesce(psp_transfer, '')::text AS psp_transfer, coalesce(last_error, '')::text AS last_error,
       coalesce(error_class, '')::text AS error_class, created_at, updated_at
FROM payouts_for_api WHERE id = @id;

-- name: History :many
SELECT coalesce(from_status, '')::text AS from_status, to_status, attempt, coalesce(error, '')::text AS error,
       coalesce(error_class, '')::text AS error_class, at
FROM payout_transitions_for_api WHERE payout_id = @payout_id ORDER BY id;

-- name: PSPRequests :many
SELECT attempt, kind, coalesce(step, '')::text AS step, coalesce(idempotency_key, '')::text AS idempotency_key, outcome,
       coalesce(psp_reference, '')::text AS psp_reference, coalesce(error, '')::text AS error, at
FROM payout_attempts_for_api WHERE payout_id = @payout_id ORDER BY id;

-- name: Evidence :many
SELECT provider, event_id, event_type, coalesce(amount, 0)::bigint AS amount, coalesce(currency, '')::text AS currency,
       coalesce(psp_reference, '')::text AS psp_reference, verdict, coalesce(reason, '')::text AS reason, at
FROM payout_evidence_for_api WHERE payout_id = @payout_id ORDER BY id;

-- name: CancelPayout :one
-- Cancels the payout if nobody has taken it up yet, under its row lock (the
-- worker's first step takes the same lock), and answers it as it is after
-- the call (payout-worker's cancel_payout): payout_exists false when there
-- is no such payout.
SELECT coalesce(c.payout_exists, false)::boolean AS payout_exists, coalesce(c.canceled, false)::boolean AS canceled,
       coalesce(c.status, '')::text AS status, coalesce(c.error_class, '')::text AS error_class,
       coalesce(c.last_error, '')::text AS last_error, coalesce(c.user_id, '')::text AS user_id,
       coalesce(c.amount, 0)::bigint AS amount, coalesce(c.currency, '')::text AS currency,
       coalesce(c.provider, '')::text AS provider, coalesce(c.correlation_id, '')::text AS correlation_id
FROM cancel_payout(@id, @client_id) c;

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
       (SELECT coalesce(sum(p.amount), 0) FROM payouts_for_api p
        WHERE p.user_id = d.user_id AND p.destination_id = d.id AND p.currency = @currency
          AND p.status <> ALL(@unpaid::text[]))::bigint AS paid
FROM destinations d WHERE d.id = @destination_id;
