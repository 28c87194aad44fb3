package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/aegis-payments/aegis/pkg/fixture"
	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// The credit baseline must post what the worker's credit posts: a credit
// transaction with two balanced entries and a wallet balance per
// transaction, from the worker's own SQL.
func TestCreditScriptPostsBalancedCredits(t *testing.T) {
	if _, err := exec.LookPath("pgbench"); err != nil {
		t.Skip("pgbench not installed")
	}
	db := pgtest.New(t)
	ctx := context.Background()
	clearing := fixture.Wallet{Kind: fixture.KindSystem, Owner: fixture.PSPClearing}.Insert(t, db.Pool)
	repo, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	script, err := creditScript(repo, clearing)
	if err != nil {
		t.Fatal(err)
	}
	const clients, perClient = 2, 25
	out, err := exec.CommandContext(ctx, "pgbench", "-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-t", strconv.Itoa(perClient),
		"-f", writeTemp(t, script), db.URL).CombinedOutput()
	if err != nil {
		t.Fatalf("pgbench: %v\n%s\nscript:\n%s", err, out, script)
	}
	var txs, entries, claims int
	var sum, balances int64
	if err := db.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM ledger_transactions WHERE kind = 'credit'),
		(SELECT count(*) FROM ledger_entries),
		-- a credit's record of its message: its ledger transaction's message_id
		(SELECT count(*) FROM ledger_transactions WHERE kind = 'credit' AND message_id IS NOT NULL)
			+ (SELECT count(*) FROM processed_events),
		(SELECT coalesce(sum(amount), 0) FROM ledger_entries),
		(SELECT coalesce(sum(balance), 0) FROM wallets WHERE kind = 'user')`).Scan(&txs, &entries, &claims, &sum, &balances); err != nil {
		t.Fatal(err)
	}
	if want := clients * perClient; txs != want || claims != want || entries != 2*want {
		t.Fatalf("%d credit transactions, %d claims, %d entries; want %d, %d, %d", txs, claims, entries, want, want, 2*want)
	}
	if sum != 0 || balances != int64(clients*perClient*1000) {
		t.Fatalf("entries sum to %d (want 0), user balances %d (want %d)", sum, balances, clients*perClient*1000)
	}
}

func TestCreditScriptReadsTheLedgerQueries(t *testing.T) {
	repo, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := creditScript(repo, 1); err != nil {
		t.Fatal(err)
	}
}

func writeTemp(t *testing.T, s string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.sql")
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
