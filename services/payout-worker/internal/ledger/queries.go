package ledger

// All SQL on wallets, ledger_transactions and ledger_entries lives here.

const sqlEnsureWallet = `
INSERT INTO wallets (kind, owner, currency) VALUES ($1, $2, $3)
ON CONFLICT (kind, owner, currency) DO NOTHING`

const sqlWalletID = `SELECT id FROM wallets WHERE kind = $1 AND owner = $2 AND currency = $3`

const sqlInsertTransaction = `
INSERT INTO ledger_transactions (kind, reference, correlation_id) VALUES ($1, $2, $3)
ON CONFLICT (kind, reference) DO NOTHING
RETURNING id`

const sqlCreditUser = `
UPDATE wallets SET balance = balance + $2, version = version + 1, updated_at = now()
WHERE id = $1 AND kind = 'user'`

// sqlDebitUser checks the balance under the row lock it takes: a concurrent
// debit waits for this transaction and then re-evaluates balance >= $2.
const sqlDebitUser = `
UPDATE wallets SET balance = balance - $2, version = version + 1, updated_at = now()
WHERE id = $1 AND kind = 'user' AND balance >= $2
RETURNING balance`

const sqlInsertEntry = `
INSERT INTO ledger_entries (transaction_id, wallet_id, amount, currency) VALUES ($1, $2, $3, $4)`

const sqlBalance = `SELECT balance FROM wallets WHERE kind = 'user' AND owner = $1 AND currency = $2`
