-- All SQL of the integrity check and its runs, compiled by sqlc into
-- package sqlcdb.

-- name: Counts :one
SELECT (SELECT count(*) FROM ledger_transactions_for_ops)::bigint AS transactions,
       (SELECT count(*) FROM ledger_entries_for_ops)::bigint AS entries,
       (SELECT count(*) FROM wallets_for_ops WHERE kind = 'user')::bigint AS user_wallets,
       (SELECT count(*) FROM wallets_for_ops WHERE kind = 'system')::bigint AS system_wallets;

-- name: Unbalanced :many
-- (transaction, currency) groups that do not sum to zero; total is the count
-- before LIMIT.
SELECT transaction_id::text AS transaction_id, currency, sum(amount)::bigint AS sum, count(*) OVER () AS total
FROM ledger_entries_for_ops
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
    FROM ledger_entries_for_ops e
    WHERE e.wallet_id IN (SELECT id FROM wallets_for_ops WHERE kind = 'user')
    GROUP BY e.wallet_id
), checked AS (
    SELECT w.owner, w.currency, w.balance, coalesce(s.computed, 0)::bigint AS computed
    FROM wallets_for_ops w
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
-- Finished payouts (@closed: SUCCEEDED, FINALIZED) whose share of the payout holds
-- account is not zero: the hold was neither paid out nor given back exactly
-- once (a release and a settlement both posted, or neither). total is the
-- count before LIMIT.
SELECT p.id::text AS payout_id, p.status, p.currency, sum(e.amount)::bigint AS held, count(*) OVER () AS total
FROM payouts_for_ops p
JOIN ledger_transactions_for_ops t ON t.reference = p.id::text
     AND t.kind IN ('payout_hold', 'payout_settle', 'payout_release')
JOIN ledger_entries_for_ops e ON e.transaction_id = t.id
JOIN wallets_for_ops w ON w.id = e.wallet_id AND w.kind = 'system' AND w.owner = 'payout_holds'
WHERE p.status = ANY(@closed::text[])
GROUP BY p.id, p.status, p.currency
HAVING sum(e.amount) <> 0
ORDER BY p.id
LIMIT @max_rows;

-- name: UnfinishedHolds :many
-- Payouts not finished whose share of the payout holds account (in the
-- payout's currency) is not what their state says: the whole amount from
-- the hold (posted with the move to SENDING_TO_GATEWAY) until it is settled
-- or released, except a NEEDS_REVIEW payout the PSP paid after its hold was
-- released (nothing left to hold); nothing before the hold (INITIALIZED) or
-- once the payout failed (FAILED: released, or settled and then returned).
-- total is the count before LIMIT.
WITH shares AS (
    SELECT p.id, p.user_id, p.status, p.currency, p.amount,
           coalesce(sum(e.amount) FILTER (WHERE w.id IS NOT NULL), 0)::bigint AS actual,
           bool_or(t.kind = 'payout_release') AS released
    FROM payouts_for_ops p
    LEFT JOIN ledger_transactions_for_ops t ON t.reference = p.id::text
         AND t.kind IN ('payout_hold', 'payout_settle', 'payout_release')
    LEFT JOIN ledger_entries_for_ops e ON e.transaction_id = t.id
    LEFT JOIN wallets_for_ops w ON w.id = e.wallet_id AND w.kind = 'system' AND w.owner = 'payout_holds'
         AND w.currency = p.currency
    -- Every state but SUCCEEDED and FINALIZED (payoutstate's Closed),
    -- written out rather than a parameter: the list proves the predicate of
    -- the partial index payouts_status_since_idx (status NOT IN
    -- ('SUCCEEDED', 'FINALIZED')), which the planner then scans instead of
    -- every finished payout; a parameter, under a generic plan, would lose it.
    WHERE p.status IN ('INITIALIZED', 'SENDING_TO_GATEWAY', 'SENT_TO_GATEWAY', 'AWAITING_RESPONSE', 'RETRYING',
                       'FAILED', 'NEEDS_REVIEW')
    GROUP BY p.id, p.user_id, p.status, p.currency, p.amount
), judged AS (
    SELECT id, user_id, status, currency, actual,
           (CASE WHEN status = ANY(@unheld::text[]) THEN 0
                 WHEN status = ANY(@reviewable::text[]) AND coalesce(released, false) THEN 0
                 ELSE amount END)::bigint AS expected
    FROM shares
)
SELECT id::text AS payout_id, user_id, status, currency, expected, actual, count(*) OVER () AS total
FROM judged
WHERE actual <> expected
ORDER BY id
LIMIT @max_rows;

-- name: OpenDisputes :many
-- Disputes whose share of the disputes account is not what their state
-- says: the disputed amount while open, nothing once won or lost. total is
-- the count before LIMIT.
WITH shares AS (
    SELECT r.provider, r.object_id, r.user_id, r.currency, r.state, r.amount,
           coalesce(sum(e.amount) FILTER (WHERE w.id IS NOT NULL), 0)::bigint AS actual
    FROM payment_returns_for_ops r
    LEFT JOIN ledger_transactions_for_ops t ON t.reference = r.provider || ':' || r.object_id
         AND t.kind IN ('dispute_hold', 'dispute_release', 'dispute_loss')
    LEFT JOIN ledger_entries_for_ops e ON e.transaction_id = t.id
    LEFT JOIN wallets_for_ops w ON w.id = e.wallet_id AND w.kind = 'system' AND w.owner = 'disputes'
         AND w.currency = r.currency
    WHERE r.kind = 'dispute'
    GROUP BY r.provider, r.object_id, r.user_id, r.currency, r.state, r.amount
), judged AS (
    SELECT provider, object_id, user_id, currency, state, actual,
           (CASE WHEN state = 'open' THEN amount ELSE 0 END)::bigint AS expected
    FROM shares
)
SELECT (provider || ':' || object_id)::text AS dispute, user_id, currency, state, expected, actual,
       count(*) OVER () AS total
FROM judged
WHERE actual <> expected
ORDER BY provider, object_id
LIMIT @max_rows;

-- name: UserReceivables :many
-- Users whose owed (on their wallet row) is not their share of the
-- receivables account. A receivables entry belongs to the user whose
-- wallet is in the same transaction (a repayment; a refund or dispute the
-- wallet covered in part) or, when the wallet covered nothing, to the user
-- of the refund or dispute the transaction is named after
-- (payment_returns). Entries that belong to no user are reported by
-- AccountTotals. total is the count before LIMIT.
WITH rec AS (
    SELECT e.transaction_id, e.amount, e.currency, t.kind, t.reference
    FROM ledger_entries_for_ops e
    JOIN wallets_for_ops w ON w.id = e.wallet_id AND w.kind = 'system' AND w.owner = 'receivables'
    JOIN ledger_transactions_for_ops t ON t.id = e.transaction_id
), owned AS (
    SELECT coalesce(
               (SELECT uw.owner FROM ledger_entries_for_ops ue
                JOIN wallets_for_ops uw ON uw.id = ue.wallet_id AND uw.kind = 'user'
                WHERE ue.transaction_id = rec.transaction_id LIMIT 1),
               (SELECT r.user_id FROM payment_returns_for_ops r
                WHERE r.provider || ':' || r.object_id = rec.reference
                  AND r.kind = CASE rec.kind WHEN 'refund' THEN 'refund' ELSE 'dispute' END
                LIMIT 1)) AS user_id,
           rec.currency, rec.amount
    FROM rec
), per_user AS (
    SELECT user_id, currency, -sum(amount)::bigint AS ledger_owed
    FROM owned WHERE user_id IS NOT NULL
    GROUP BY user_id, currency
), checked AS (
    SELECT coalesce(w.owner, p.user_id) AS user_id, coalesce(w.currency, p.currency) AS currency,
           coalesce(w.owed, 0)::bigint AS owed, coalesce(p.ledger_owed, 0)::bigint AS ledger_owed
    FROM (SELECT owner, currency, owed FROM wallets_for_ops WHERE kind = 'user') w
    FULL JOIN per_user p ON p.user_id = w.owner AND p.currency = w.currency
)
SELECT user_id::text AS user_id, currency::text AS currency, owed, ledger_owed, count(*) OVER () AS total
FROM checked
WHERE owed <> ledger_owed
ORDER BY user_id, currency
LIMIT @max_rows;

-- name: AccountTotals :many
-- The system accounts whose balance is not what the rest of the database
-- says it must be (docs/reference/accounting.md): receivables = −Σ owed of the
-- wallets, disputes = Σ open disputes, payout holds = Σ of the payouts
-- holding money (as UnfinishedHolds judges each). Per currency; an entry
-- that belongs to no user, dispute or payout shows here.
WITH actual AS (
    SELECT w.owner, w.currency, coalesce(sum(e.amount), 0)::bigint AS balance
    FROM wallets_for_ops w
    LEFT JOIN ledger_entries_for_ops e ON e.wallet_id = w.id
    WHERE w.kind = 'system' AND w.owner IN ('receivables', 'disputes', 'payout_holds')
    GROUP BY w.owner, w.currency
), expected AS (
    SELECT 'receivables'::text AS owner, currency, -sum(owed)::bigint AS balance
    FROM wallets_for_ops WHERE kind = 'user' GROUP BY currency
    UNION ALL
    SELECT 'disputes', currency, sum(amount)::bigint
    FROM payment_returns_for_ops WHERE kind = 'dispute' AND state = 'open' GROUP BY currency
    UNION ALL
    SELECT 'payout_holds', p.currency, sum(p.amount)::bigint
    FROM payouts_for_ops p
    -- The states holding money (payoutstate's InFlight), written out for
    -- payouts_status_since_idx as in UnfinishedHolds.
    WHERE p.status IN ('SENDING_TO_GATEWAY', 'SENT_TO_GATEWAY', 'AWAITING_RESPONSE', 'RETRYING')
       OR (p.status = 'NEEDS_REVIEW' AND NOT EXISTS (
           SELECT 1 FROM ledger_transactions_for_ops t WHERE t.kind = 'payout_release' AND t.reference = p.id::text))
    GROUP BY p.currency
), totals AS (
    SELECT owner, currency, sum(balance)::bigint AS balance FROM expected GROUP BY owner, currency
)
SELECT coalesce(a.owner, x.owner)::text AS owner, coalesce(a.currency, x.currency)::text AS currency,
       coalesce(x.balance, 0)::bigint AS expected, coalesce(a.balance, 0)::bigint AS actual
FROM actual a
FULL JOIN totals x ON x.owner = a.owner AND x.currency = a.currency
WHERE coalesce(a.balance, 0) <> coalesce(x.balance, 0)
ORDER BY 1, 2;

-- name: StatementTimeout :exec
-- Bounds every statement of the check's transaction.
SELECT set_config('statement_timeout', @timeout::text, true);

-- name: SystemAccounts :many
SELECT w.owner, w.currency, coalesce(sum(e.amount), 0)::bigint AS balance
FROM wallets_for_ops w
LEFT JOIN ledger_entries_for_ops e ON e.wallet_id = w.id
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
