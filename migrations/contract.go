package migrations

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ContractNext returns the table reads (per role, per table, the
// privileges in roles_test.go's wantGrants letters) a role keeps only for
// the previous release's pods, which still use them during the rollout of
// the release that moved them to views: 000030, 000031 and 000035 (the
// _for_ops and _for_api views), 000032 (payout-worker's verdicts in its own
// resolution_verdicts; it reads the resolutions through a view), 000033
// (dlq-admin's runs through webhook-api's functions and its own
// psp_run_alerts). The next release's contract migration revokes them and
// empties this list (docs/operations/deploy.md, "Pending contract"); until
// then no new code may use them. roles_test.go fails on a privilege here
// that the migrations do not grant, and checks that a role reads a table it
// does not write only through a view once this list and ContractNextWrites
// are revoked.
func ContractNext() map[string]map[string]string {
	return map[string]map[string]string{
		RoleDLQAdmin: {"payouts": "S", "payout_transitions": "S", "payout_attempts": "S", "payout_evidence": "S",
			"wallets": "S", "ledger_transactions": "S", "ledger_entries": "S", "payment_returns": "S",
			"psp_disagreements": "S", "psp_reconciliation_runs": "SIU"},
		RoleWebhookAPI: {"payouts": "S", "payout_transitions": "S", "payout_attempts": "S", "payout_evidence": "S",
			"wallets": "S", "ledger_transactions": "S", "ledger_entries": "S", "payment_returns": "S"},
		RolePayoutWorker: {"payout_resolutions": "SU"},
	}
}

// ContractNextWrites returns the writes a role keeps only for the previous
// release's pods, which still write the tables during the rollout of the
// release that moved those writes into the owner's functions (000034:
// webhook-api creates and cancels payouts through create_payout and
// cancel_payout), in ContractNext's form. The next release's contract
// migration revokes them with ContractNext and empties this list.
func ContractNextWrites() map[string]map[string]string {
	return map[string]map[string]string{
		RoleWebhookAPI: {"payouts": "IU", "payout_transitions": "I"},
	}
}

// Execer runs a statement: a connection, a pool or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// ApplyContractNext revokes ContractNext and ContractNextWrites in db's
// database, as the next release's contract migration will: a test runs a
// service's code as its role after it to show that the current release
// needs none of them. Table grants are per database, so only db's database
// changes; db must be its owner (the migrator).
func ApplyContractNext(ctx context.Context, db Execer) error {
	verbs := map[rune]string{'S': "SELECT", 'I': "INSERT", 'U': "UPDATE", 'D': "DELETE"}
	for _, list := range []map[string]map[string]string{ContractNext(), ContractNextWrites()} {
		for _, role := range slices.Sorted(maps.Keys(list)) {
			for _, table := range slices.Sorted(maps.Keys(list[role])) {
				var privileges []string
				for _, v := range list[role][table] {
					p, ok := verbs[v]
					if !ok {
						return fmt.Errorf("contract: %s on %s: unknown privilege %c", role, table, v)
					}
					privileges = append(privileges, p)
				}
				stmt := fmt.Sprintf("REVOKE %s ON %s FROM %s", strings.Join(privileges, ", "),
					pgx.Identifier{table}.Sanitize(), pgx.Identifier{role}.Sanitize())
				if _, err := db.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("contract: revoke %s on %s from %s: %w", list[role][table], table, role, err)
				}
			}
		}
	}
	return nil
}
