-- A Stripe payout to a connected account that names one of its external
-- accounts is two objects at Stripe: a Transfer from the platform to the
-- connected account, then a payout on the connected account (Stripe-Account)
-- to that bank account or card. The payout keeps the external account it
-- was accepted for (copied from its destination when it is created, so a
-- later change of the destination's record cannot re-point money in
-- flight) and, once Stripe made it, the transfer: from then on only the
-- connected account's payout is ever sent again, never a second transfer.
-- Each request is recorded with the step it belongs to.
-- Expand only: nullable columns the previous release ignores, and
-- create_payout replaced with the same signature (the previous release's
-- webhook-api calls it unchanged).
SET lock_timeout = '5s';

ALTER TABLE payouts
    ADD COLUMN external_account text
        CHECK (external_account IS NULL OR (external_account <> '' AND octet_length(external_account) <= 255)),
    ADD COLUMN psp_transfer text CHECK (psp_transfer IS NULL OR psp_transfer <> '');

-- NULL: the payout is one object at its PSP (a Stripe transfer to a
-- connected account with no external account named, a Paystack transfer).
ALTER TABLE payout_attempts
    ADD COLUMN step text CHECK (step IS NULL OR step IN ('transfer', 'connected_payout'));

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
                             provider, correlation_id, destination_id, status, external_account)
        VALUES (p_id, p_client_id, p_idempotency_key, p_request_hash, p_user_id, p_amount, p_currency,
                p_destination, p_provider, p_correlation_id, p_destination_id, 'INITIALIZED',
                (SELECT d.external_account FROM destinations d WHERE d.id = p_destination_id))
        ON CONFLICT (client_id, idempotency_key) DO NOTHING
        RETURNING *
    ), first_transition AS (
        INSERT INTO payout_transitions (payout_id, from_status, to_status, attempt)
        SELECT created.id, NULL, 'INITIALIZED', 0 FROM created
    )
    SELECT * FROM created;
$$;

-- What GET /v1/payouts/{id} shows of the two steps.
CREATE OR REPLACE VIEW payouts_for_api AS
SELECT id, client_id, idempotency_key, request_hash, user_id, amount, currency, destination, destination_id, provider,
       status, attempts, psp_reference, last_error, error_class, created_at, updated_at, external_account, psp_transfer
FROM payouts;

CREATE OR REPLACE VIEW payout_attempts_for_api AS
SELECT id, payout_id, attempt, kind, idempotency_key, outcome, psp_reference, error, at, step
FROM payout_attempts;
