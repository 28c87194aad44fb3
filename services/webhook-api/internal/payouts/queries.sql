-- The SQL of creating a payout, compiled by sqlc into package sqlcdb. The
-- reads of Get and Cancel's statements are still in store.go (not
-- converted yet: pkg/database's doc).

-- name: InsertPayout :one
-- No row back: a concurrent request with the key committed first.
INSERT INTO payouts (id, client_id, idempotency_key, request_hash, user_id, amount, currency, destination,
                     provider, correlation_id, destination_id)
VALUES (@id, @client_id, @idempotency_key, @request_hash, @user_id, @amount, @currency, @destination,
        @provider, @correlation_id, @destination_id)
ON CONFLICT (client_id, idempotency_key) DO NOTHING
RETURNING id;

-- name: InsertFirstTransition :exec
INSERT INTO payout_transitions (payout_id, from_status, to_status, attempt) VALUES (@payout_id, NULL, 'INITIALIZED', 0);

-- name: ByKey :one
SELECT id, request_hash FROM payouts WHERE client_id = @client_id AND idempotency_key = @idempotency_key;

-- name: LockDaily :exec
-- Serializes the daily-limit check of one user and currency: two concurrent
-- payouts cannot both fit under the limit by not seeing each other.
-- Transaction-scoped, released at commit.
SELECT pg_advisory_xact_lock(hashtextextended('payout-daily:' || @user_id::text || ':' || @currency::text, 0));

-- name: PaidOutDaily :one
-- What the user was paid out in the currency over the last 24 hours,
-- counting every accepted payout that did not fail (payouts_user_idx).
SELECT coalesce(sum(amount), 0)::bigint AS paid_out FROM payouts
WHERE user_id = @user_id AND currency = @currency AND created_at > now() - interval '24 hours'
  AND status NOT IN ('FAILED', 'FINALIZED');
