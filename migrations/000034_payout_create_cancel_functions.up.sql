-- payouts and payout_transitions have one writer, payout-worker: its state
-- machine, and for the two changes that start at a client (a new payout,
-- a cancel) these functions of its schema, which webhook-api calls in its
-- own transaction (with the outbox row of the same request), so that
-- POST /v1/payouts and its cancel still answer once the payout exists or
-- is canceled. The state words and what "cancelable" means are
-- pkg/payoutstate's (Initialized, Cancelable, Failed, Finalized); a test
-- there calls cancel_payout on a payout in every state and fails when the
-- two disagree.
--
-- SECURITY DEFINER: they run as the migrator, which owns the tables, so
-- the caller needs EXECUTE and no grant on the tables; the search path is
-- pinned so that nothing the caller puts on its path is resolved here.
-- EXECUTE is revoked from PUBLIC (Postgres grants it by default) and given
-- to webhook-api alone.
--
-- This is the expand step: webhook-api's INSERT and UPDATE on payouts and
-- INSERT on payout_transitions stay for the previous release's pods during
-- the rollout and are revoked by the next release's contract migration
-- (docs/operations/deploy.md, "Pending contract"; migrations/contract.go,
-- ContractNextWrites).

-- create_payout inserts a new INITIALIZED payout and its first transition
-- (from nothing to INITIALIZED, attempt 0), and returns the payout's row.
-- It returns no row when the client's Idempotency-Key already made a
-- payout: a concurrent request with the key committed first (the caller
-- then reads that payout).
CREATE FUNCTION create_payout(p_id uuid, p_client_id text, p_idempotency_key text, p_request_hash text,
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

-- cancel_payout cancels a payout nobody has taken up yet, under its row
-- lock (the lock the worker's first step takes, so either the cancel or
-- the worker's hold wins, never both): an INITIALIZED payout moves to
-- FAILED and on to FINALIZED with class 'canceled' and the client named
-- (last_error), both transitions recorded as the worker's state machine
-- records a failure. It answers one row: payout_exists false when there is
-- no such payout (the rest NULL); else the payout as it is after the call,
-- and canceled = whether this call canceled it. A payout in any other state
-- is left as it is (canceled false): a FINALIZED one of class 'canceled'
-- was canceled before, any other is not cancelable. The caller writes the
-- outcome event when canceled is true.
CREATE FUNCTION cancel_payout(p_id uuid, p_client_id text,
                              OUT payout_exists boolean, OUT canceled boolean, OUT status text,
                              OUT error_class text, OUT last_error text, OUT user_id text, OUT amount bigint,
                              OUT currency text, OUT provider text, OUT correlation_id text)
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
DECLARE
    p payouts%ROWTYPE;
    reason text := 'canceled by client ' || p_client_id;
BEGIN
    SELECT * INTO p FROM payouts WHERE payouts.id = p_id FOR UPDATE;
    payout_exists := FOUND;
    IF NOT payout_exists THEN
        RETURN;
    END IF;
    canceled := p.status = 'INITIALIZED';
    IF canceled THEN
        UPDATE payouts
        SET status = 'FINALIZED', last_error = reason, error_class = 'canceled', updated_at = now()
        WHERE payouts.id = p_id AND payouts.status = 'INITIALIZED'
        RETURNING * INTO p;
        INSERT INTO payout_transitions (payout_id, from_status, to_status, attempt, error, error_class)
        VALUES (p_id, 'INITIALIZED', 'FAILED', 0, reason, 'canceled'),
               (p_id, 'FAILED', 'FINALIZED', 0, NULL, NULL);
    END IF;
    status := p.status;
    error_class := coalesce(p.error_class, '');
    last_error := coalesce(p.last_error, '');
    user_id := p.user_id;
    amount := p.amount;
    currency := p.currency;
    provider := p.provider;
    correlation_id := p.correlation_id;
END
$$;

REVOKE EXECUTE ON FUNCTION create_payout(uuid, text, text, text, text, bigint, text, text, text, text, uuid),
    cancel_payout(uuid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION create_payout(uuid, text, text, text, text, bigint, text, text, text, text, uuid),
    cancel_payout(uuid, text) TO aegis_webhook_api;
