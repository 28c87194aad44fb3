-- The previous release reads verdicts on payout_resolutions: the ones this
-- release's worker recorded go back there before their table goes (rows
-- still pending, or closed by dlq-admin, which copies the status only).
SET lock_timeout = '5s';

UPDATE payout_resolutions r
SET status = v.status, psp_answer = v.psp_answer, decided_at = v.decided_at
FROM resolution_verdicts v
WHERE v.resolution_id = r.id AND r.decided_at IS NULL;

DROP VIEW payout_resolutions_for_worker;
DROP VIEW payout_resolutions_state;
DROP VIEW resolution_verdicts_for_ops;
DROP TABLE resolution_verdicts;
