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
// they belong to. A credit has no processed_events row of its own: its
// ledger transaction names the message that posted it (message_id), and
// that unique posting is the message's idempotency record (CreditClaim in
// queries.sql), one row written per credit instead of two.
//
// Accounts: a user's wallet per currency; per currency, a PSP clearing
// account per provider (money held for us at the PSP) and a payout holds
// account (money on its way out). A credit moves clearing → wallet, a payout
// hold wallet → holds, a paid payout holds → clearing, a failed one holds →
// wallet, and a payout the bank returns after it was paid clearing → wallet.
//
// Money that goes back (returns.go, docs/reference/accounting.md): per currency a
// disputes account (a disputed amount frozen while the dispute is open) and
// a receivables account (what wallets could not cover). A refund moves
// wallet → clearing, a dispute wallet → disputes, then disputes → clearing
// when lost or back to the wallet when won. Those debits are never refused
// (the money has already left at the PSP): what the balance does not cover
// comes from receivables and is added to the wallet's owed, which every
// later credit repays first and which blocks payouts until it is zero.
// payment_returns records each refund's and dispute's state, so only the
// difference to an event's outcome is posted, in any delivery order.
//
// Credits, the bulk of the traffic, are committed in groups
// (CreditCommitter, committer.go): each credit's CreditOnce statements, for
// every credit waiting, in one BEGIN ... COMMIT, because a commit each was
// what capped the worker's credit rate. The statements already behave as
// separate transactions would inside one (each checks the rows the earlier
// ones wrote), groups lock wallets in one order, and a failed group is
// retried one credit at a time so a bad credit fails only itself.
//
// A debit checks the balance in the same UPDATE that takes the wallet's row
// lock (balance >= amount), so two workers whose Redis locks overlap still
// cannot both spend the same money: the second waits for the first's commit
// and then sees the lower balance.
package ledger
