DROP VIEW payout_attempts_for_api;
CREATE VIEW payout_attempts_for_api AS
SELECT id, payout_id, attempt, kind, idempotency_key, outcome, psp_reference, error, at
FROM payout_attempts;
GRANT SELECT ON payout_attempts_for_api TO aegis_webhook_api;

DROP VIEW payouts_for_api;
CREATE VIEW payouts_for_api AS
SELECT id, client_id, idempotency_key, request_hash, user_id, amount, currency, destination, destination_id, provider,
       status, attempts, psp_reference, last_error, error_class, created_at, updated_at
FROM payouts;
GRANT SELECT ON payouts_for_api TO aegis_webhook_api;

CREATE OR REPLACE FUNCTION create_payout(p_id uuid, p_client_id text, p_idempotency_key text, p_request_hash text,
                                         p_user_id text, p_amount bigint, p_currency text, p_destination text,
                                         p_provider text, p_correlation_id text, p_destination_id uuid)
RETURNS SETOF payouts
LANGUAGE sql
SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
    WITH created AS (
        INSERT INTO payouts (id, client_id, idempotency_key, request_hash, user_id, amount, currency, destination,
                             provider, correlation_id, destination_id, status)
        VALUES (p_id, p_client_id, p_idempotency_key, p_request_hash, p_user_id, p_amount, p_currency,
                p_destination, p_provider, p_correlation_id, p_destination_id, 'INITIALIZED')
        ON CONFLICT (client_id, idempotency_key) DO NOTHING
        RETURNING *
    ), first_transition AS (
        INSERT INTO payout_transitions (payout_id, from_status, to_status, attempt)
        SELECT created.id, NULL, 'INITIALIZED', 0 FROM created
    )
    SELECT * FROM created;
$$;

ALTER TABLE payout_attempts DROP COLUMN step;
ALTER TABLE payouts DROP COLUMN psp_transfer, DROP COLUMN external_account;
