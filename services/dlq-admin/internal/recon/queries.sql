-- All SQL of the integrity check and its runs, compiled by sqlc into
-- package sqlcdb.

-- name: Counts :one
SELECT (SELECT count(*) FROM ledger_transactions)::bigint AS transactions,
       (SELECT count(*) FROM ledger_entries)::bigint AS entries,
       (SELECT count(*) FROM wallets WHERE kind = 'user')::bigint AS user_wallets,
       (SELECT count(*) FROM wallets WHERE kind = 'system')::bigint AS system_wallets;

-- name: Unbalanced :many
-- (transaction, currency) groups that do not sum to zero; total is the count
-- before LIMIT.
SELECT transaction_id::text AS transaction_id, currency, sum(amount)::bigint AS sum, count(*) OVER () AS total
FROM ledger_entries
GROUP BY transaction_id, currency
HAVING sum(amount) <> 0
ORDER BY transaction_id, currency
LIMIT @max_rows;

-- name: UserWallets :many
-- User wallets whose stored balance differs from the sum of their entries,
-- or that are negative either way, with exact counts of each kind of
-- problem.
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
       (balance <> computed)::bool AS mismatch, (balance < 0 OR computed < 0)::bool AS negative,
       count(*) FILTER (WHERE balance <> computed) OVER () AS mismatches,
       count(*) FILTER (WHERE balance < 0 OR computed < 0) OVER () AS negatives
FROM checked
WHERE balance <> computed OR balance < 0 OR computed < 0
ORDER BY owner, currency
LIMIT @max_rows;

-- name: OpenHolds :many
-- Finished payouts (SUCCEEDED, FINALIZED) whose share of the payout holds
-- account is not zero: the hold was neither paid out nor given back exactly
-- once (a release and a settlement both posted, or neither). total is the
-- count before LIMIT.
SELECT p.id::text AS payout_id, p.status, p.currency, sum(e.amount)::bigint AS held, count(*) OVER () AS total
FROM payouts p
JOIN ledger_transactions t ON t.reference = p.id::text
     AND t.kind IN ('payout_hold', 'payout_settle', 'payout_release')
JOIN ledger_entries e ON e.transaction_id = t.id
JOIN wallets w ON w.id = e.wallet_id AND w.kind = 'system' AND w.owner = 'payout_holds'
WHERE p.status IN ('SUCCEEDED', 'FINALIZED')
GROUP BY p.id, p.status, p.currency
HAVING sum(e.amount) <> 0
ORDER BY p.id
LIMIT @max_rows;

-- name: StatementTimeout :exec
-- Bounds every statement of the check's transaction.
SELECT set_config('statement_timeout', @timeout::text, true);

-- name: SystemAccounts :many
SELECT w.owner, w.currency, coalesce(sum(e.amount), 0)::bigint AS balance
FROM wallets w
LEFT JOIN ledger_entries e ON e.wallet_id = w.id
WHERE w.kind = 'system'
GROUP BY w.id, w.owner, w.currency
ORDER BY w.owner, w.currency;

-- name: TryLock :one
-- Keeps checks from running at once (replicas' scheduled runs, and
-- on-demand runs: a second one answers 409); it is released when the
-- check's transaction ends.
SELECT pg_try_advisory_xact_lock(1701002, 1)::bool AS locked;

-- name: InsertRun :one
INSERT INTO reconciliation_runs (started_at, finished_at, ok, trigger, actor, summary)
VALUES (@started_at, @finished_at, @ok, @trigger, nullif(@actor::text, ''), @summary)
RETURNING id;

-- name: LatestRun :one
SELECT id, started_at, finished_at, ok, trigger, actor, summary
FROM reconciliation_runs
ORDER BY started_at DESC, id DESC
LIMIT 1;
