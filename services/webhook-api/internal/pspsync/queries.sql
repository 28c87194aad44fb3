-- The SQL of psp_reconciliation_runs and psp_reconciliation_cursors, and
-- what a run reads, compiled by sqlc into package sqlcdb. Times are the
-- database's (now()). River works the runs (worker.go): locked_by is the
-- fencing token of the River attempt that holds a run.

-- name: InsertRun :one
-- Records a run (its River job is inserted in the same transaction); no row
-- when one is requested or running already (the partial unique index).
INSERT INTO psp_reconciliation_runs (trigger, requested_by) VALUES (@trigger::text, nullif(@requested_by::text, ''))
ON CONFLICT DO NOTHING
RETURNING id;

-- name: Start :one
-- Marks run @id running under @token, the River attempt working it: a
-- requested run, or a running one whose earlier attempt River rescued or
-- retried (its token no longer holds). No row: the run is over.
UPDATE psp_reconciliation_runs SET status = 'running', started_at = coalesce(started_at, now()),
    locked_by = @token::text, lease_until = NULL, attempts = attempts + 1
WHERE id = @id AND status IN ('requested', 'running')
RETURNING id, trigger, now()::timestamptz AS now;

-- name: Release :exec
-- Hands an unfinished run back (the worker is stopping or interrupted).
UPDATE psp_reconciliation_runs SET status = 'requested', locked_by = NULL, lease_until = NULL
WHERE id = @id AND locked_by = @owner::text AND status = 'running';

-- name: Finish :execrows
UPDATE psp_reconciliation_runs SET status = @status, finished_at = now(), locked_by = NULL, lease_until = NULL,
    events_found = @events_found, events_recovered = @events_recovered, events_present = @events_present,
    disagreement_count = @disagreement_count,
    report = @report, disagreements = @disagreements, error = nullif(@error::text, '')
WHERE id = @id AND locked_by = @owner::text AND status = 'running';

-- name: Cursor :one
SELECT synced_until FROM psp_reconciliation_cursors WHERE provider = @provider;

-- name: SetCursor :exec
-- Moves the provider's cursor forward, never back.
INSERT INTO psp_reconciliation_cursors (provider, synced_until, last_event_id, run_id)
VALUES (@provider, @synced_until, nullif(@last_event_id::text, ''), @run_id::bigint)
ON CONFLICT (provider) DO UPDATE
SET synced_until = greatest(psp_reconciliation_cursors.synced_until, EXCLUDED.synced_until),
    last_event_id = coalesce(EXCLUDED.last_event_id, psp_reconciliation_cursors.last_event_id),
    run_id = EXCLUDED.run_id, updated_at = now();

-- name: KnownEvents :many
SELECT event_id FROM webhook_events WHERE provider = @provider AND event_id = ANY(@event_ids::text[]);

-- name: Payouts :many
-- settled: unchanged for longer than the grace. Amount, currency,
-- destination and the PSP object recorded are compared with the PSP's.
-- external_account set: the payout is a transfer to the connected account
-- (destination), recorded in psp_transfer, then that account's payout to
-- the external account, recorded in psp_reference.
SELECT id::text AS id, status, (updated_at < now() - make_interval(secs => @grace_seconds::float8))::bool AS settled,
    amount, currency, destination, coalesce(psp_reference, '')::text AS psp_reference,
    coalesce(external_account, '')::text AS external_account, coalesce(psp_transfer, '')::text AS psp_transfer
FROM payouts_for_api WHERE id = ANY((@ids::text[])::uuid[]);

-- name: SucceededPayouts :many
-- This provider's payouts in @status (payoutstate.Succeeded) here since
-- @since: each must be paid at the PSP. A payout to a connected account's
-- external account is left to ConnectedPayouts, which checks both its
-- objects.
SELECT id::text AS id, coalesce(psp_reference, '')::text AS psp_reference, amount, currency, destination FROM payouts_for_api
WHERE provider = @provider AND status = @status::text AND updated_at >= @since AND external_account IS NULL
ORDER BY updated_at LIMIT @max_rows;

-- name: ConnectedPayouts :many
-- This provider's payouts to a connected account's external account
-- (Stripe Connect: a transfer, then the connected account's payout) that
-- are in one of @in_flight (payoutstate.InFlight) or changed since @since,
-- the newest first, at most @max_rows: the connected accounts whose events
-- a run reads, and the payouts it compares on both levels. settled as in
-- Payouts.
SELECT id::text AS id, status, (updated_at < now() - make_interval(secs => @grace_seconds::float8))::bool AS settled,
    amount, currency, destination, coalesce(psp_reference, '')::text AS psp_reference,
    coalesce(external_account, '')::text AS external_account, coalesce(psp_transfer, '')::text AS psp_transfer
FROM payouts_for_api
WHERE provider = @provider AND external_account IS NOT NULL
  AND (status = ANY(@in_flight::text[]) OR updated_at >= @since)
ORDER BY updated_at DESC LIMIT @max_rows;

-- name: StoredReturns :many
-- Refund and dispute events stored between @since and the grace ago: each
-- must have its ledger posting by now.
SELECT event_id, payload FROM webhook_events
WHERE provider = @provider AND received_at >= @since AND received_at < now() - make_interval(secs => @grace_seconds::float8)
  AND (event_type LIKE 'refund.%' OR event_type LIKE 'charge.dispute.%' OR event_type = 'charge.refunded')
ORDER BY id LIMIT @max_rows;

-- name: ReturnPosted :one
SELECT EXISTS (SELECT 1 FROM payment_returns_for_api WHERE provider = @provider AND kind = @kind AND object_id = @object_id);

-- name: FinishCounts :exec
-- The run's disagreements after their lifecycle (new, still open, cleared).
UPDATE psp_reconciliation_runs SET disagreements_new = @new_count::int, disagreements_open = @open_count::int,
    disagreements_cleared = @cleared_count::int, disagreements = @disagreements
WHERE id = @id;

-- name: SeeDisagreement :one
-- Opens a disagreement or, when it is open already, records that this run
-- saw it again; fresh says which.
INSERT INTO psp_disagreements (provider, kind, subject, payout_id, psp_object_id, psp_status, ledger_status, event_id, detail,
    first_seen_run, last_seen_run)
VALUES (@provider, @kind, @subject, nullif(@payout_id::text, ''), nullif(@psp_object_id::text, ''), nullif(@psp_status::text, ''),
    nullif(@ledger_status::text, ''), nullif(@event_id::text, ''), @detail, @run_id::bigint, @run_id::bigint)
ON CONFLICT (provider, kind, subject) WHERE cleared_at IS NULL DO UPDATE
SET last_seen_run = EXCLUDED.last_seen_run, last_seen_at = now(), psp_status = EXCLUDED.psp_status,
    ledger_status = EXCLUDED.ledger_status, detail = EXCLUDED.detail
RETURNING first_seen_at, (first_seen_run = @run_id::bigint)::bool AS fresh;

-- name: ClearDisagreements :execrows
-- Closes the open disagreements of the providers this run compared in full
-- that it did not see again.
UPDATE psp_disagreements SET cleared_run = @run_id::bigint, cleared_at = now()
WHERE cleared_at IS NULL AND provider = ANY(@providers::text[]) AND last_seen_run <> @run_id::bigint;

-- name: OpenDisagreements :many
SELECT provider, kind, count(*)::int AS open FROM psp_disagreements WHERE cleared_at IS NULL GROUP BY provider, kind;

-- name: ClearingBalances :many
-- The PSP clearing account's balance per currency (the sum of its entries;
-- negative: what the PSP holds for us as the ledger sees it).
SELECT e.currency::text AS currency, coalesce(sum(e.amount), 0)::bigint AS balance
FROM ledger_entries_for_api e JOIN wallets_for_api w ON w.id = e.wallet_id
WHERE w.kind = 'system' AND w.owner = @owner::text
GROUP BY e.currency ORDER BY e.currency;

-- name: FeesNotCollected :many
-- The clearing account's credits (per currency: their amounts) posted since
-- payout-worker's fee collector last read @provider's fee record
-- (psp_fee_cursors.read_to, less a minute: a payment's balance transaction
-- is a little older than its credit; all of them when it never ran). Their
-- fee is at the PSP and not in the ledger yet, at most their amount.
SELECT e.currency::text AS currency, coalesce(-sum(e.amount), 0)::bigint AS amount
FROM ledger_entries_for_api e
JOIN wallets_for_api w ON w.id = e.wallet_id
JOIN ledger_transactions_for_api t ON t.id = e.transaction_id
WHERE w.kind = 'system' AND w.owner = @owner::text AND t.kind = 'credit'
  AND e.created_at > coalesce((SELECT c.read_to FROM psp_fee_cursors_for_api c WHERE c.provider = @provider::text),
                              '-infinity'::timestamptz) - interval '1 minute'
GROUP BY e.currency ORDER BY e.currency;

-- name: PayoutsHeld :many
-- This provider's payouts in one of @in_flight (payoutstate.InFlight: held,
-- not final) per currency: the PSP may have moved their money while the
-- clearing account has not yet; at most @max_ids ids each, oldest first.
SELECT currency::text AS currency, count(*)::int AS n, coalesce(sum(amount), 0)::bigint AS amount,
    (array_agg(id::text ORDER BY updated_at))[1:@max_ids::int]::text[] AS ids
FROM payouts_for_api WHERE provider = @provider AND status = ANY(@in_flight::text[])
GROUP BY currency ORDER BY currency;

-- name: CreditsNotPosted :many
-- Payments (events of @types) stored since @since whose credit the ledger
-- has not posted yet, once per payment, per currency: the PSP holds their
-- money while the clearing account does not show it yet; at most @max_ids
-- payment references each, oldest first.
SELECT p.currency::text AS currency, count(*)::int AS n, coalesce(sum(p.amount), 0)::bigint AS amount,
    (array_agg(p.object_id ORDER BY p.id))[1:@max_ids::int]::text[] AS refs
FROM (SELECT DISTINCT ON (e.object_id) e.id, e.object_id, e.amount, e.currency
      FROM webhook_events e
      WHERE e.provider = @provider AND e.event_type = ANY(@types::text[]) AND e.received_at >= @since
        AND e.object_id IS NOT NULL AND e.amount IS NOT NULL AND e.currency IS NOT NULL
      ORDER BY e.object_id, e.id) p
WHERE NOT EXISTS (SELECT 1 FROM ledger_transactions_for_api t WHERE t.kind = 'credit' AND t.reference = @provider || ':' || p.object_id)
GROUP BY p.currency ORDER BY p.currency;

-- name: LastBalance :one
-- The balance comparison of the provider stored by the latest finished run
-- before @run_id that made one: the baseline this run's is compared with.
SELECT id, (report -> @provider::text -> 'balance')::jsonb AS balance FROM psp_reconciliation_runs
WHERE id < @run_id::bigint AND finished_at IS NOT NULL AND jsonb_typeof(report -> @provider::text -> 'balance') = 'array'
ORDER BY id DESC LIMIT 1;

-- name: LastSucceeded :one
-- When the latest succeeded run finished (aegis_psp_reconciliation_last_success_timestamp_seconds).
-- One run is active at a time, so the latest requested is the latest
-- finished: the requested_at index finds it without a scan.
SELECT finished_at::timestamptz AS finished_at FROM psp_reconciliation_runs
WHERE status = 'succeeded' ORDER BY requested_at DESC LIMIT 1;
