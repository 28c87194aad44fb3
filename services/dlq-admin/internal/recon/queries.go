package recon

// All SQL of the integrity check and its runs.

const sqlCounts = `
SELECT (SELECT count(*) FROM ledger_transactions),
       (SELECT count(*) FROM ledger_entries),
       (SELECT count(*) FROM wallets WHERE kind = 'user'),
       (SELECT count(*) FROM wallets WHERE kind = 'system')`

// sqlUnbalanced lists (transaction, currency) groups that do not sum to
// zero; the window count is the total before LIMIT.
const sqlUnbalanced = `
SELECT transaction_id::text, currency, sum(amount)::bigint, count(*) OVER ()
FROM ledger_entries
GROUP BY transaction_id, currency
HAVING sum(amount) <> 0
ORDER BY transaction_id, currency
LIMIT $1`

// sqlUserWallets lists user wallets whose stored balance differs from the
// sum of their entries, or that are negative either way, with exact counts
// of each kind of problem.
const sqlUserWallets = `
WITH sums AS (
    SELECT e.wallet_id, sum(e.amount) AS computed
    FROM ledger_entries e
    WHERE e.wallet_id IN (SELECT id FROM wallets WHERE kind = 'user')
    GROUP BY e.wallet_id
), checked AS (
    SELECT w.owner, w.currency, w.balance, coalesce(s.computed, 0)::bigint AS computed
    FROM wallets w
    LEFT JOIN sums s ON s.wallet_id = w.id
    WHERE w.kind = 'user'
)
SELECT owner, currency, balance, computed,
       balance <> computed, balance < 0 OR computed < 0,
       count(*) FILTER (WHERE balance <> computed) OVER (),
       count(*) FILTER (WHERE balance < 0 OR computed < 0) OVER ()
FROM checked
WHERE balance <> computed OR balance < 0 OR computed < 0
ORDER BY owner, currency
LIMIT $1`

// sqlOpenHolds lists finished payouts (SUCCEEDED, FINALIZED) whose share of
// the payout holds account is not zero: the hold was neither paid out nor
// given back exactly once (a release and a settlement both posted, or
// neither). The window count is the total before LIMIT.
const sqlOpenHolds = `
SELECT p.id::text, p.status, p.currency, sum(e.amount)::bigint, count(*) OVER ()
FROM payouts p
JOIN ledger_transactions t ON t.reference = p.id::text
     AND t.kind IN ('payout_hold', 'payout_settle', 'payout_release')
JOIN ledger_entries e ON e.transaction_id = t.id
JOIN wallets w ON w.id = e.wallet_id AND w.kind = 'system' AND w.owner = 'payout_holds'
WHERE p.status IN ('SUCCEEDED', 'FINALIZED')
GROUP BY p.id, p.status, p.currency
HAVING sum(e.amount) <> 0
ORDER BY p.id
LIMIT $1`

// sqlStatementTimeout bounds every statement of the check's transaction.
const sqlStatementTimeout = `SELECT set_config('statement_timeout', $1, true)`

const sqlSystemAccounts = `
SELECT w.owner, w.currency, coalesce(sum(e.amount), 0)::bigint
FROM wallets w
LEFT JOIN ledger_entries e ON e.wallet_id = w.id
WHERE w.kind = 'system'
GROUP BY w.id, w.owner, w.currency
ORDER BY w.owner, w.currency`

// sqlTryLock keeps checks from running at once (replicas' scheduled runs,
// and on-demand runs: a second one answers 409); it is released when the
// check's transaction ends.
const sqlTryLock = `SELECT pg_try_advisory_xact_lock(1701002, 1)`

const sqlInsertRun = `
INSERT INTO reconciliation_runs (started_at, finished_at, ok, trigger, actor, summary)
VALUES ($1, $2, $3, $4, nullif($5, ''), $6)
RETURNING id`

const sqlLatestRun = `
SELECT id, started_at, finished_at, ok, trigger, actor, summary
FROM reconciliation_runs
ORDER BY started_at DESC, id DESC
LIMIT 1`
