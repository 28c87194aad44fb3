package migrations

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The runs the previous release alerted on (alerted_at set) are dlq-admin's
// alerted runs after 000033, with their time; a run not alerted on is not.
func TestPSPRunAlertsStartWithTheRunsAlertedOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := migrated(t)
	db := connect(t, dbURL)
	run := func(file string) {
		sql, err := FS.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, string(sql)); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	run("000033_psp_runs_one_writer.down.sql")
	var alerted, unalerted int64
	insert := `INSERT INTO psp_reconciliation_runs (status, trigger, started_at, finished_at, error, alerted_at)
		VALUES ('failed', 'scheduled', now(), now(), 'stripe: 503', $1) RETURNING id`
	if err := db.QueryRow(ctx, insert, "2026-01-02T03:04:05Z").Scan(&alerted); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, insert, nil).Scan(&unalerted); err != nil {
		t.Fatal(err)
	}
	run("000033_psp_runs_one_writer.up.sql")

	rows, err := db.Query(ctx, `SELECT a.run_id FROM psp_run_alerts a JOIN psp_reconciliation_runs r ON r.id = a.run_id
		WHERE a.alerted_at = r.alerted_at ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{alerted}; !slices.Equal(got, want) {
		t.Fatalf("psp_run_alerts after 000033: %v, want %v (not %d)", got, want, unalerted)
	}
}
