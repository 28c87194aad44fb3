// Package published keeps, for the harnesses that judge what the relay
// published (the chaos invariants, the e2e tests, the backoff bench), a
// copy of every outbox row the relay deletes.
//
// The relay deletes an outbox row once Kafka has acknowledged it: nothing
// in the suite reads a published row again. The harnesses do: per-key
// order compares Kafka's order with the rows' ids, the chaos drain counts
// the dead letters staged to <topic>.dlq, a test reads the traceparent a
// row carried. Keep installs a statement trigger on transaction_outbox that
// copies the rows each DELETE removes into published_outbox, a table of the
// harness's own scratch database: the suite's schema (migrations/) has no
// such table, and a deployed relay keeps nothing. The copy costs an insert
// per published row, so the bench's e2e scenario, which measures the
// suite's own writes, does not install it.
package published

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Keep installs the copy on the database of pool, which must be connected
// as the owner of transaction_outbox. The trigger runs as its owner
// (SECURITY DEFINER): the relay's role may write transaction_outbox only.
func Keep(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, `
		CREATE TABLE published_outbox (LIKE transaction_outbox);
		CREATE FUNCTION keep_published_outbox() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
		SET search_path = public AS $$
		BEGIN
			INSERT INTO published_outbox SELECT * FROM gone;
			RETURN NULL;
		END $$;
		CREATE TRIGGER keep_published_outbox AFTER DELETE ON transaction_outbox
			REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION keep_published_outbox();`)
	if err != nil {
		return fmt.Errorf("keep a copy of published outbox rows: %w", err)
	}
	return nil
}

// Rows is every outbox row the relay published, to use as a table
// (`FROM ` + published.Rows + ` o`): the copies Keep kept (the relay
// deletes the rows it publishes, and only those: a row that failed for
// good stays, settled dlq) and any row still marked processed (by a relay
// of an earlier version, or planted by a test).
const Rows = `(SELECT * FROM transaction_outbox WHERE status = 'processed'
	UNION ALL SELECT * FROM published_outbox)`

// All is every outbox row written, published or not: Rows and the rows
// still in transaction_outbox.
const All = `(SELECT * FROM transaction_outbox UNION ALL SELECT * FROM published_outbox)`
