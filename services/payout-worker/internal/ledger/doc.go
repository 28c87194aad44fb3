// Package ledger posts double-entry transactions: every money movement is one
// ledger_transactions row whose entries sum to zero per currency. The
// database enforces that at commit (a deferred constraint trigger), keeps
// ledger history append-only, and refuses a negative user balance (a CHECK),
// so a bug here fails loudly instead of corrupting money.
//
// Every posting is idempotent at the ledger itself: (kind, reference) is
// unique, so the same PSP payment or payout step can never post twice, even
// if two consumers race or a message is replayed. Postings take the caller's
// pgx.Tx so they commit with the state change and the processed_events row
// they belong to.
//
// Accounts: a user's wallet per currency; per currency, a PSP clearing
// account per provider (money held for us at the PSP) and a payout holds
// account (money on its way out). A credit moves clearing → wallet, a payout
// hold wallet → holds, a paid payout holds → clearing, a failed one holds →
// wallet, and a payout the bank returns after it was paid clearing → wallet.
//
// A debit checks the balance in the same UPDATE that takes the wallet's row
// lock (balance >= amount), so two workers whose Redis locks overlap still
// cannot both spend the same money: the second waits for the first's commit
// and then sees the lower balance.
package ledger
