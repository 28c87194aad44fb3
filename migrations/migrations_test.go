package migrations

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestUpDownUp(t *testing.T) {
	ctx := context.Background()
	dbURL := newDatabase(t)

	v, err := Up(dbURL)
	if err != nil || v == 0 {
		t.Fatalf("Up: version %d, %v", v, err)
	}
	if v2, err := Up(dbURL); err != nil || v2 != v {
		t.Fatalf("second Up must be a no-op: %d %v", v2, err)
	}
	if err := Down(dbURL); err != nil {
		t.Fatalf("Down: %v", err)
	}
	db, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	var tables int
	err = db.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public' AND table_name <> 'schema_migrations'`).Scan(&tables)
	db.Close(ctx)
	if err != nil || tables != 0 {
		t.Fatalf("Down left %d tables (%v)", tables, err)
	}
	if _, err := Up(dbURL); err != nil {
		t.Fatalf("Up after Down: %v", err)
	}
	if _, err := driverURL("mysql://x"); err == nil {
		t.Fatal("non-postgres URL must be refused")
	}
}

// newDatabase creates an empty database for the test (dropped after it)
// and returns its URL.
func newDatabase(t *testing.T) string {
	t.Helper()
	admin := os.Getenv("TEST_DATABASE_URL")
	if admin == "" {
		admin = "postgres://127.0.0.1:5432/postgres?sslmode=disable"
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	name := fmt.Sprintf("aegis_migrations_test_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
	})
	u, _ := url.Parse(admin)
	u.Path = "/" + name
	return u.String()
}

// A migration that cannot connect says why without printing the password,
// however the URL is spelled.
func TestErrorsNeverShowThePassword(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"postgres://aegis:hunter2secret@127.0.0.1:bad/aegis",
		"postgres://aegis:hunter2secret@127.0.0.1:1/aegis?sslmode=disable&connect_timeout=2",
		"postgres://aegis:hunter2secret@127.0.0.1:5432/aegis?sslmode=bogus",
		"postgres://aegis:hunter%32secret@[::1/aegis",
		"postgres://aegis:hunter%32secret@127.0.0.1:1/aegis?sslmode=disable&connect_timeout=2",
	} {
		_, err := Up(u)
		if err == nil {
			t.Fatalf("%s: Up must fail", u)
		}
		for _, pw := range []string{"hunter2secret", "hunter%32secret"} {
			if strings.Contains(err.Error(), pw) {
				t.Errorf("Up error shows the password: %v", err)
			}
		}
		if err := Down(u); err == nil || strings.Contains(err.Error(), "hunter") {
			t.Errorf("Down error: %v", err)
		}
	}
}
