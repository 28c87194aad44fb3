-- A confirmed absence counts only once the PSP has had time to finish the
-- last request whose outcome we did not learn: a slow request that still
-- executes after a lookup found nothing must not be paid twice. See services/payout-worker/internal/payout (attempt.go).
SET lock_timeout = '5s';

-- last_unknown_at: when the latest create whose outcome is unknown (a
-- timeout, a connection lost after sending, a 5xx, a 409 in use) was sent.
-- Until PSP_SETTLE_WINDOW has passed since, the PSP may still be executing
-- it: a lookup that finds nothing proves nothing, so the payout is neither
-- sent again under a new key nor given its hold back; it is looked up again
-- later.
ALTER TABLE payouts ADD COLUMN last_unknown_at timestamptz;

-- Payouts with an unknown outcome before this migration: the answer time of
-- their latest unknown create (later than its send time: conservative).
UPDATE payouts p
SET last_unknown_at = a.at
FROM (SELECT payout_id, max(at) AS at FROM payout_attempts
      WHERE kind = 'create' AND outcome = 'unknown' GROUP BY payout_id) a
WHERE a.payout_id = p.id AND p.outcome_unknown;
