-- A payout's scheduled retry is keyed by its payout (payout-retry:<payout
-- id>), not by its user: a row not yet due holds back every later row of
-- its key, and a retry on the user's key held that user's credits, payouts
-- and settlement events for the whole of its delay (why the retry needs no
-- order with them: services/payout-worker/internal/payout/order.go).
-- Retries written before, still waiting, move to their payout's key here
-- instead of holding their user until they are due; the user stays in the
-- user_key header, under which the retry's dead letter is filed. A row a
-- relay holds (processing) is left as it is: it is being published now.
-- A worker of the previous release still running during the rollout may
-- write a few more on the user's key; they hold their user only until they
-- are due, as before.
UPDATE transaction_outbox
SET partition_key = 'payout-retry:' || (payload->>'payout_id'),
    headers = headers || jsonb_build_object('user_key', partition_key),
    updated_at = now()
WHERE finished_at IS NULL AND id > 0
  AND status IN ('pending', 'failed')
  AND topic = 'aegis.transactions'
  AND event_type = 'payout.requested'
  AND headers->>'message_id' LIKE 'payout:%:retry:%'
  AND coalesce(payload->>'payout_id', '') <> ''
  AND partition_key NOT LIKE 'payout-retry:%';
