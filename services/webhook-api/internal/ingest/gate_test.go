package ingest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/aegis-payments/aegis/migrations"
	"github.com/aegis-payments/aegis/pkg/pgtest"
	"github.com/aegis-payments/aegis/services/webhook-api/internal/ingest"
)

// swap is the contract migration that partitions webhook_events.
const swap = 56

// Production's migrate holds the swap back across one release: release A's
// first migrate (from a schema of before this work, 000043) applies
// everything up to the swap and stops before it, and so does A's second;
// release B's applies it. Ingest saves and finds duplicates at each step.
func TestMigrateHoldsTheSwapUntilTheNextRelease(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.Empty(t)
	require.NoError(t, migrations.UpTo(dbURL, 43))
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	store := ingest.NewStore(pool, noNotify{}, time.Now)

	r, err := migrations.UpGated(dbURL, migrations.Gate{Release: "v1.4.0"})
	require.NoError(t, err)
	require.Equal(t, uint(swap-1), r.Version, "every migration before the swap applies")
	require.NotNil(t, r.Held)
	require.Equal(t, uint(swap), r.Held.Version)
	require.Equal(t, "v1.4.0", r.Held.By)
	require.Empty(t, r.Applied)
	require.False(t, partitioned(t, pool))
	usable(t, store, "a1")

	r, err = migrations.UpGated(dbURL, migrations.Gate{Release: "v1.4.0"})
	require.NoError(t, err)
	require.Equal(t, uint(swap-1), r.Version, "the same release's migrate holds it still")
	require.NotNil(t, r.Held)
	require.Equal(t, "v1.4.0", r.Held.By)
	require.False(t, partitioned(t, pool))
	usable(t, store, "a2")

	r, err = migrations.UpGated(dbURL, migrations.Gate{Release: "v1.5.0"})
	require.NoError(t, err)
	require.Equal(t, uint(swap), r.Version, "the next release's migrate applies it")
	require.Nil(t, r.Held)
	require.Equal(t, []uint{swap}, r.Applied)
	require.True(t, partitioned(t, pool))
	usable(t, store, "b1")
	// What was saved before the swap is still a duplicate after it.
	s, err := store.Save(ctx, credit("evt_gate_a1", "pi_gate_a1", 0))
	require.NoError(t, err)
	require.Equal(t, ingest.Duplicate, s.Outcome)

	var heldBy, appliedBy string
	require.NoError(t, pool.QueryRow(ctx, `SELECT held_by, applied_by FROM schema_contract_holds WHERE version = $1`, swap).
		Scan(&heldBy, &appliedBy))
	require.Equal(t, []string{"v1.4.0", "v1.5.0"}, []string{heldBy, appliedBy})

	r, err = migrations.UpGated(dbURL, migrations.Gate{Release: "v1.4.0"})
	require.NoError(t, err)
	require.Equal(t, uint(swap), r.Version, "an applied contract migration is not held again")
	require.Nil(t, r.Held)
}

// `migrate --contract` applies a held contract migration at once, and a
// database with no migration applied (no release can run on it) gets
// everything.
func TestMigrateContractAppliesTheHeldSwap(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.Empty(t)
	require.NoError(t, migrations.UpTo(dbURL, 43))
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	store := ingest.NewStore(pool, noNotify{}, time.Now)

	r, err := migrations.UpGated(dbURL, migrations.Gate{Release: "dev"})
	require.NoError(t, err)
	require.Equal(t, uint(swap-1), r.Version)
	require.NotNil(t, r.Held)
	usable(t, store, "c1")

	r, err = migrations.UpGated(dbURL, migrations.Gate{Release: "dev", Contract: true})
	require.NoError(t, err)
	require.Equal(t, uint(swap), r.Version, "--contract applies it")
	require.Equal(t, []uint{swap}, r.Applied)
	require.True(t, partitioned(t, pool))
	usable(t, store, "c2")

	fresh := pgtest.Empty(t)
	r, err = migrations.UpGated(fresh, migrations.Gate{Release: "v1.4.0"})
	require.NoError(t, err)
	require.True(t, r.Fresh)
	require.Equal(t, uint(swap), r.Version, "a new database gets every migration")
	require.Nil(t, r.Held)
}

func partitioned(t *testing.T, pool *pgxpool.Pool) bool {
	t.Helper()
	var p bool
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT relkind = 'p' FROM pg_class WHERE oid = 'webhook_events'::regclass`).Scan(&p))
	return p
}

// usable saves a new event on both commit paths and sees a retry of it as
// a duplicate.
func usable(t *testing.T, store *ingest.Store, tag string) {
	t.Helper()
	ctx := context.Background()
	id := "evt_gate_" + tag
	s, err := store.Save(ctx, credit(id, "pi_gate_"+tag, 0))
	require.NoError(t, err, tag)
	require.Equal(t, ingest.Accepted, s.Outcome, tag)
	many := store.SaveGroup(ctx, []ingest.Pending{
		credit(id, "pi_gate_"+tag, 0),
		credit(id+"_group", fmt.Sprintf("pi_gate_%s_group", tag), 0),
	})
	require.Equal(t, []ingest.Outcome{ingest.Duplicate, ingest.Accepted}, outcomes(t, many), tag)
}
