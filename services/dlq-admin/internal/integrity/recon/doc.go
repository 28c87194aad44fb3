// Package recon is the ledger's integrity check: every ledger transaction sums to zero per currency,
// every user wallet's stored balance equals the sum of its entries, and no
// user wallet is negative. The system accounts keep no stored balance; each
// is checked against what it holds money for, as docs/reference/accounting.md
// promises: every payout's share of payout_holds (zero once finished; its
// amount from its hold until it is settled or released while unfinished),
// every dispute's share of disputes (its amount while open, zero once
// closed), every user's share of receivables against the owed on their
// wallet row, and per currency each account's balance against the total
// (receivables = −Σ owed, disputes = Σ open disputes, payout_holds = Σ of
// the payouts holding money), which also catches an entry that belongs to
// no payout, dispute or user. Each disagreement names the account, the
// payout, dispute or user, and expected against actual. The PSP clearing
// accounts' sums are reported for information only (what the PSP holds is
// the PSP reconciliation's business).
//
// The database already refuses most of these states (a deferred trigger
// balances every transaction, a check keeps user balances non-negative), so
// a discrepancy means something bypassed them: a manual UPDATE, a restore,
// a bug in a migration. That is why it is a critical alert, and why the check
// reads the ledger itself rather than trusting the constraints.
//
// The whole check runs in one REPEATABLE READ, READ ONLY transaction: every
// query sees the same snapshot, so a credit committing mid-check cannot look
// like a mismatch. Each query is a GROUP BY over ledger_entries (no loop per
// wallet, payout or dispute), and only the first MaxListed offenders of each
// kind are named; the counts are exact. Every run is stored in
// reconciliation_runs with its summary; a run that finds a discrepancy raises one critical alert (key "reconciliation")
// naming the wallets and transactions; what pages is
// aegis_reconciliation_discrepancies, which every replica reads from the
// latest stored run at each scrape (metrics.go).
//
// Runs are scheduled and can be asked for (POST /v1/reconciliation). The
// schedule is a pkg/jobs Schedule (scheduled.go, run by package jobs):
// every replica inserts the check's River job at the start of each
// RECONCILE_INTERVAL period (UTC multiples of the interval), unique per
// period, and when it starts unless this period's already ran, so N
// replicas run one check per interval whichever River client of the shared
// schema leads (River's own periodic jobs are inserted only by the
// leader's client, which may be webhook-api's). A failed scheduled run is not
// retried; the next period's is. A scheduled run is still skipped while a
// manual one runs (a transaction-scoped advisory lock).
package recon
