-- The previous release keys a payout's retry by its user: waiting retries
-- go back to their user's key (kept in their user_key header), behind
-- which that user's later rows wait again.
UPDATE transaction_outbox
SET partition_key = headers->>'user_key',
    updated_at = now()
WHERE finished_at IS NULL AND id > 0
  AND status IN ('pending', 'failed')
  AND partition_key LIKE 'payout-retry:%'
  AND coalesce(headers->>'user_key', '') <> '';
