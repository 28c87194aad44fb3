package bench

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// The bench vacuums the tables autovacuum would: more dead rows than the
// table's own threshold plus scale factor times its rows, and no other.
func TestVacuumDueUsesEachTablesAutovacuumTrigger(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	// One connection: pg_stat_force_next_flush publishes this session's
	// counts of dead rows.
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, sql := range []string{
		`CREATE TABLE bench_due (id int) WITH (autovacuum_vacuum_threshold = 10, autovacuum_vacuum_scale_factor = 0)`,
		`CREATE TABLE bench_not_due (id int) WITH (autovacuum_vacuum_threshold = 1000, autovacuum_vacuum_scale_factor = 0)`,
		`INSERT INTO bench_due SELECT generate_series(1, 50)`,
		`INSERT INTO bench_not_due SELECT generate_series(1, 50)`,
		`DELETE FROM bench_due`,
		`DELETE FROM bench_not_due`,
		`SELECT pg_stat_force_next_flush()`,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	rows, err := conn.Query(ctx, sqlVacuumDue)
	if err != nil {
		t.Fatal(err)
	}
	due, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || due[0] != "public.bench_due" {
		t.Fatalf("due for a vacuum: %v, want [public.bench_due] (50 dead rows: above 10, below 1000)", due)
	}
	n, err := vacuumDue(ctx, db.Pool)
	if err != nil || n != 1 {
		t.Fatalf("vacuumDue: %d tables, %v; want 1", n, err)
	}
	var dueDead, notDueDead int
	if err := conn.QueryRow(ctx, `SELECT
		(SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'bench_due'),
		(SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'bench_not_due')`).Scan(&dueDead, &notDueDead); err != nil {
		t.Fatal(err)
	}
	if dueDead != 0 || notDueDead != 50 {
		t.Fatalf("dead rows after the vacuum: %d in the table due (want 0), %d in the other (want 50)", dueDead, notDueDead)
	}
}
