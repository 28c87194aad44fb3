-- webhook-api reads payouts and payout_transitions, whose one writer is
-- payout-worker (000034), through these views, each with the columns its
-- queries use (as 000031's _for_api views): the payouts store (the
-- Idempotency-Key's payout, the limits' sums, GET /v1/payouts/{id} and its
-- history), ingest (a payout's user, its event's partition) and the PSP
-- reconciliation (the payouts it compares with the PSP's). Simple views:
-- the planner inlines them and the tables' indexes serve them. SELECT only:
-- webhook-api takes no row lock on a payout (cancel_payout takes it, as
-- the owner).
--
-- Expand step: webhook-api's SELECT on both tables stays for the previous
-- release's pods during the rollout and goes in the next release's
-- contract migration with its writes (docs/operations/deploy.md, "Pending
-- contract"; migrations/contract.go).

CREATE VIEW payouts_for_api AS
SELECT id, client_id, idempotency_key, request_hash, user_id, amount, currency, destination, destination_id, provider,
       status, attempts, psp_reference, last_error, error_class, created_at, updated_at
FROM payouts;

CREATE VIEW payout_transitions_for_api AS
SELECT id, payout_id, from_status, to_status, attempt, error, error_class, at
FROM payout_transitions;

GRANT SELECT ON payouts_for_api, payout_transitions_for_api TO aegis_webhook_api;
