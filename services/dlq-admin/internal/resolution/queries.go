package resolution

// All SQL on payout_resolutions and approvals dlq-admin runs. The worker
// writes a resolution's verdict (status, psp_answer, decided_at) itself.

const sqlPayoutForResolution = `SELECT user_id, status FROM payouts WHERE id = $1::uuid`

const sqlPayoutCorrelation = `SELECT correlation_id FROM payouts WHERE id = $1::uuid`

const sqlInsertResolution = `
INSERT INTO payout_resolutions (id, payout_id, user_id, outcome, reason, psp_object_id, requested_by, status, created_at)
VALUES ($1, $2::uuid, $3, $4, $5, $6, $7, $8, $9)`

const sqlMarkSent = `
UPDATE payout_resolutions SET status = 'pending', outbox_id = $2, approved_by = nullif($3, '')
WHERE id = $1`

const sqlRejectResolution = `
UPDATE payout_resolutions SET status = 'rejected', decided_at = $2
WHERE id = $1 AND status = 'awaiting_approval'`

const sqlResolutionStatus = `SELECT status FROM payout_resolutions WHERE id = $1 FOR UPDATE`

const sqlSelectResolutions = `
SELECT r.id::text, r.payout_id::text, r.user_id, r.outcome, r.reason, r.psp_object_id, r.requested_by, r.status,
       r.psp_answer, r.approved_by, r.outbox_id, r.created_at, r.decided_at,
       (SELECT a.id FROM approvals a WHERE a.kind = 'payout_resolution' AND a.target_id = r.id::text
        ORDER BY a.id DESC LIMIT 1)
FROM payout_resolutions r`

const sqlInsertApproval = `
INSERT INTO approvals (kind, target_id, request, summary, requested_by, created_at)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING id`

const approvalColumns = `
id, kind, target_id, request, summary, requested_by, status, decided_by, decision_reason, result_id, created_at, decided_at`

const sqlGetApproval = `SELECT ` + approvalColumns + ` FROM approvals WHERE id = $1`

const sqlLockApproval = `SELECT ` + approvalColumns + ` FROM approvals WHERE id = $1 FOR UPDATE`

const sqlListApprovals = `
SELECT ` + approvalColumns + ` FROM approvals
WHERE ($1 = '' OR status = $1)
ORDER BY id DESC
LIMIT $2`

const sqlDecideApproval = `
UPDATE approvals SET status = $2, decided_by = $3, decision_reason = nullif($4, ''), result_id = nullif($5, ''), decided_at = $6
WHERE id = $1 AND status = 'pending'
RETURNING ` + approvalColumns
