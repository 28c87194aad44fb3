package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgbenchRunner runs the baseline of ingest: the same two inserts as a
// webhook (inbox row and outbox row, one transaction, the same ~1 KiB
// jsonb body and envelope) run by pgbench, whose client costs next to
// nothing. Two databases: the schema's own (migrations, with every index
// and constraint ingest pays for) and a bare one (the same columns, only
// the identity primary keys), so the difference says what the schema
// costs.
type pgbenchRunner struct {
	url, script string
}

// bareSchema is webhook_events and transaction_outbox with the same columns
// and defaults but none of the schema's unique constraint, checks, NOT NULLs
// and partial indexes: only each table's identity primary key.
const bareSchema = `
CREATE TABLE webhook_events (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    provider text, event_id text, event_type text, object_id text, user_id text, amount bigint,
    currency text, occurred_at timestamptz, payload jsonb, correlation_id text,
    received_at timestamptz DEFAULT now());
CREATE TABLE transaction_outbox (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    topic text, event_type text, partition_key text DEFAULT '', payload jsonb, headers jsonb DEFAULT '{}',
    status text DEFAULT 'pending', correlation_id text DEFAULT '', retry_count integer DEFAULT 0,
    max_retries integer DEFAULT 6, last_error text, retry_history jsonb DEFAULT '[]',
    next_retry_at timestamptz DEFAULT now(), locked_by text, locked_until timestamptz,
    created_at timestamptz DEFAULT now(), updated_at timestamptz DEFAULT now(), processed_at timestamptz);`

// newPgbench prepares the baseline on a migrated database of the schema.
func (r *Runner) newPgbench(ctx context.Context) (*pgbenchRunner, func(), error) {
	url, pool, err := r.freshDB(ctx, "aegis_bench_pgbench")
	if err != nil {
		return nil, nil, err
	}
	pool.Close()
	return newPgbenchScript(url)
}

// newBarePgbench prepares the same inserts on the bare two tables.
func (r *Runner) newBarePgbench(ctx context.Context) (*pgbenchRunner, func(), error) {
	const name = "aegis_bench_bare"
	admin, err := pgx.Connect(ctx, r.cfg.AdminURL)
	if err != nil {
		return nil, nil, fmt.Errorf("connect to %s: %w", r.cfg.AdminURL, err)
	}
	defer admin.Close(ctx)
	for _, q := range []string{"DROP DATABASE IF EXISTS " + name + " WITH (FORCE)", "CREATE DATABASE " + name} {
		if _, err := admin.Exec(ctx, q); err != nil {
			return nil, nil, fmt.Errorf("bare pgbench database: %w", err)
		}
	}
	u, err := url.Parse(r.cfg.AdminURL)
	if err != nil {
		return nil, nil, err
	}
	u.Path = "/" + name
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, bareSchema); err != nil {
		return nil, nil, fmt.Errorf("bare pgbench schema: %w", err)
	}
	return newPgbenchScript(u.String())
}

func newPgbenchScript(url string) (*pgbenchRunner, func(), error) {
	body := stripeBody("evt_pgbench", "user-1", time.Now().Unix())
	envelope := fmt.Sprintf(`{"provider":"stripe","event_id":"evt_x","type":"payment_intent.succeeded","action":"credit","user_id":"user-1","amount":5000,"currency":"usd","reference":"pi_x","occurred_at":"2026-11-21T00:00:00Z","raw":%s}`, body)
	script := fmt.Sprintf(`\set n random(1, 1000000000000)
BEGIN;
INSERT INTO webhook_events (provider, event_id, event_type, object_id, user_id, amount, currency, occurred_at, payload, correlation_id)
VALUES ('stripe', 'evt_' || :client_id || '_' || :n, 'payment_intent.succeeded', 'pi_x', 'user-1', 5000, 'usd', now(), '%s', 'corr') ON CONFLICT DO NOTHING;
INSERT INTO transaction_outbox (topic, event_type, partition_key, payload, headers, correlation_id)
VALUES ('aegis.webhook.pending', 'payment_intent.succeeded', 'user-' || :n, '%s', '{"correlation_id":"corr"}', 'corr');
END;
`, body, envelope)
	dir, err := os.MkdirTemp("", "aegis-bench")
	if err != nil {
		return nil, nil, err
	}
	path := filepath.Join(dir, "ingest.sql")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		return nil, nil, err
	}
	return &pgbenchRunner{url: url, script: path}, func() { os.RemoveAll(dir) }, nil
}

// run runs pgbench with benchClients clients for d and returns its
// transactions per second.
func (p *pgbenchRunner) run(ctx context.Context, d time.Duration) (float64, error) {
	return p.runClients(ctx, d, benchClients)
}

// runClients runs pgbench with clients clients for d.
func (p *pgbenchRunner) runClients(ctx context.Context, d time.Duration, clients int) (float64, error) {
	return pgbenchTPS(ctx, p.url, p.script, clients, d)
}

// pgbench alone: the baseline row.
func (r *Runner) pgbench(ctx context.Context) error {
	r.progress("pgbench baseline: 2 inserts per transaction, %d clients, %s", benchClients, r.cfg.Duration)
	p, cleanup, err := r.newPgbench(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	tps, err := p.run(ctx, r.cfg.Duration)
	if err != nil {
		return err
	}
	r.add(Row{"pgbench baseline", fmt.Sprintf("webhook_events + transaction_outbox insert per tx, %d clients", benchClients),
		fmt.Sprintf("%.0f tx/s", tps), "—", ""})
	return nil
}
