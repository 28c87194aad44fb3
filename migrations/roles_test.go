package migrations

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// wantGrants is docs/design/architecture.md's table -> writer -> readers list as
// grants: per table, per role, the privileges it holds. S, I, U, D are
// SELECT, INSERT, UPDATE, DELETE on the table; "i" is SELECT on the id
// column only (what INSERT ... RETURNING id of the outbox and dead letters
// needs). A table missing here, or a grant the database has that is not
// here (or the reverse), fails TestServiceRoleGrants: a new table gets its
// grants and its line in docs/design/architecture.md in the same change.
var wantGrants = map[string]map[string]string{
	"webhook_events":             {RoleWebhookAPI: "SI"},
	"psp_objects":                {RoleWebhookAPI: "SIU"},
	"destinations":               {RoleWebhookAPI: "SIU"},
	"psp_reconciliation_cursors": {RoleWebhookAPI: "SIU"},
	"psp_reconciliation_runs":    {RoleWebhookAPI: "SIU", RoleDLQAdmin: "SIU"},
	"psp_run_alerts":             {RoleDLQAdmin: "SI"},
	"psp_disagreements":          {RoleWebhookAPI: "SIU", RoleDLQAdmin: "S"},
	"payouts":                    {RoleWebhookAPI: "SIU", RolePayoutWorker: "SU", RoleDLQAdmin: "S"},
	"payout_transitions":         {RoleWebhookAPI: "SI", RolePayoutWorker: "SI", RoleDLQAdmin: "S"},
	"payout_attempts":            {RoleWebhookAPI: "S", RolePayoutWorker: "SIu", RoleDLQAdmin: "S"},
	"payout_evidence":            {RoleWebhookAPI: "S", RolePayoutWorker: "SI", RoleDLQAdmin: "S"},
	"wallets":                    {RoleWebhookAPI: "S", RolePayoutWorker: "SIU", RoleDLQAdmin: "S"},
	"ledger_transactions":        {RoleWebhookAPI: "S", RolePayoutWorker: "SI", RoleDLQAdmin: "S"},
	"ledger_entries":             {RoleWebhookAPI: "S", RolePayoutWorker: "SI", RoleDLQAdmin: "S"},
	"credit_availability":        {RolePayoutWorker: "SI"},
	"payment_returns":            {RoleWebhookAPI: "S", RolePayoutWorker: "SIU", RoleDLQAdmin: "S"},
	"processed_events":           {RolePayoutWorker: "SI"},
	"psp_fee_cursors":            {RolePayoutWorker: "SIU"},
	"payout_resolutions":         {RolePayoutWorker: "SU", RoleDLQAdmin: "SIU"},
	"resolution_verdicts":        {RolePayoutWorker: "SI"},
	"approvals":                  {RoleDLQAdmin: "SIU"},
	"dead_letters":               {RoleWebhookAPI: "Ii", RoleOutboxRelay: "Ii", RolePayoutWorker: "Ii", RoleDLQAdmin: "SIU"},
	"replay_jobs":                {RoleDLQAdmin: "SIU"},
	"replay_job_letters":         {RoleDLQAdmin: "SI"},
	"reconciliation_runs":        {RoleDLQAdmin: "SI"},
	"audit_log":                  {RoleDLQAdmin: "SI"},
	"transaction_outbox":         {RoleWebhookAPI: "Ii", RoleOutboxRelay: "SUD", RolePayoutWorker: "Ii", RoleDLQAdmin: "SI"},
	"schema_migrations":          {},
	"schema_contract_holds":      {},
	"river_job":                  {RoleWebhookAPI: "SIUD", RoleDLQAdmin: "SIUD"},
	"river_leader":               {RoleWebhookAPI: "SIUD", RoleDLQAdmin: "SIUD"},
	"river_queue":                {RoleWebhookAPI: "SIUD", RoleDLQAdmin: "SIUD"},
	"river_migration":            {},
	"river_notification":         {},
	// outbound events (000041): dlq-admin manages endpoints, outbox-relay delivers.
	"outbound_endpoints":       {RoleDLQAdmin: "SIU"},
	"outbound_user_sequences":  {RoleOutboxRelay: "SIU"},
	"outbound_messages":        {RoleOutboxRelay: "SIUD"},
	"outbound_deliveries":      {RoleOutboxRelay: "SIUD"},
	"outbound_attempts":        {RoleOutboxRelay: "SIUD"},
	"outbound_endpoint_health": {RoleOutboxRelay: "SIUD"},
	// personal-data erasure (000050): dlq-admin records the requests; the
	// erasure itself is erase_user_data's.
	"erasures": {RoleDLQAdmin: "SIU"},
	// read only through maintain_partitions and partition_status (000044).
	"partition_policies": {},
	// written by webhook_events' dedupe trigger, trimmed by
	// maintain_partitions (000044, 000056).
	"webhook_event_keys": {},
}

// wantFunctions are the SECURITY DEFINER functions (a writer's operation
// another service may call, docs/design/architecture.md, "Tables with more
// than one writer"), by signature, and the roles that may EXECUTE each: a
// function missing here, or an EXECUTE a role has that is not here (or the
// reverse), fails TestServiceRoleGrants, as does one not owned by the schema
// owner, without a pinned search_path or callable by PUBLIC. A trigger's
// function has no callers.
var wantFunctions = map[string][]string{
	"request_psp_reconciliation_run(text)":                                    {RoleDLQAdmin},
	"end_orphaned_psp_run(bigint,text)":                                       {RoleDLQAdmin, RoleWebhookAPI},
	"psp_run_alerts_bridge()":                                                 {},
	"create_payout(uuid,text,text,text,text,bigint,text,text,text,text,uuid)": {RoleWebhookAPI},
	"cancel_payout(uuid,text)":                                                {RoleWebhookAPI},
	"disable_outbound_endpoint(uuid,text)":                                    {RoleOutboxRelay},
	"resend_outbound_delivery(bigint)":                                        {RoleDLQAdmin},
	"resend_outbound_message(bigint,uuid)":                                    {RoleDLQAdmin},
	"recover_outbound_endpoint(uuid,timestamp with time zone,integer)":        {RoleDLQAdmin},
	"erase_user_data(text,text,text[],boolean)":                               {RoleDLQAdmin},
	// Retention by time partition (000044, 000056): the only DDL a service
	// may cause, on the tables of partition_policies.
	"maintain_partitions(text)": {RoleWebhookAPI},
	"partition_status()":        {RoleWebhookAPI},
	"webhook_events_dedupe()":   {},
}

// wantViews are the views through which a service reads a table another
// service writes, and the roles that may read each: a view missing here, or
// a grant on one that is not here (or the reverse), fails
// TestServiceRoleGrants. docs/design/architecture.md's table ownership
// lists them with their tables.
var wantViews = map[string][]string{
	"payouts_for_ops":             {RoleDLQAdmin},
	"payout_transitions_for_ops":  {RoleDLQAdmin},
	"payout_attempts_for_ops":     {RoleDLQAdmin},
	"payout_evidence_for_ops":     {RoleDLQAdmin},
	"wallets_for_ops":             {RoleDLQAdmin},
	"ledger_transactions_for_ops": {RoleDLQAdmin},
	"ledger_entries_for_ops":      {RoleDLQAdmin},
	"payment_returns_for_ops":     {RoleDLQAdmin},
	"psp_disagreements_for_ops":   {RoleDLQAdmin},
	"resolution_verdicts_for_ops": {RoleDLQAdmin},
	// dlq-admin's resolutions with payout-worker's verdicts (000032).
	"payout_resolutions_state":      {RoleDLQAdmin},
	"payout_resolutions_for_worker": {RolePayoutWorker},
	// pkg/jobs reads the active run through it for both of its callers.
	"psp_reconciliation_runs_for_ops": {RoleDLQAdmin, RoleWebhookAPI},
	"payout_attempts_for_api":         {RoleWebhookAPI},
	"payout_evidence_for_api":         {RoleWebhookAPI},
	"wallets_for_api":                 {RoleWebhookAPI},
	"ledger_transactions_for_api":     {RoleWebhookAPI},
	"ledger_entries_for_api":          {RoleWebhookAPI},
	"payment_returns_for_api":         {RoleWebhookAPI},
	"payouts_for_api":                 {RoleWebhookAPI},
	"payout_transitions_for_api":      {RoleWebhookAPI},
	// the PSP reconciliation's balance comparison (000040).
	"psp_fee_cursors_for_api": {RoleWebhookAPI},
	// outbound events (000041).
	"outbound_endpoints_for_relay":     {RoleOutboxRelay},
	"outbound_messages_for_ops":        {RoleDLQAdmin},
	"outbound_deliveries_for_ops":      {RoleDLQAdmin},
	"outbound_attempts_for_ops":        {RoleDLQAdmin},
	"outbound_endpoint_health_for_ops": {RoleDLQAdmin},
}

// migrated creates a database, applies every migration and drops the
// database when t ends. It returns the owner's URL.
func migrated(t *testing.T) string {
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
	defer conn.Close(ctx)
	name := fmt.Sprintf("aegis_roles_test_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), admin)
		if err != nil {
			t.Logf("drop %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("drop %s: %v", name, err)
		}
	})
	u, _ := url.Parse(admin)
	u.Path = "/" + name
	// Production's migrate (UpGated) makes schema_contract_holds too; with
	// Contract it applies every migration, as Up does.
	if _, err := UpGated(u.String(), Gate{Release: "test", Contract: true}); err != nil {
		t.Fatalf("UpGated: %v", err)
	}
	return u.String()
}

// connect connects to dbURL, closed when the test ends.
func connect(t *testing.T, dbURL string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// asRole connects to the database at ownerURL as role, made a login first.
func asRole(t *testing.T, ownerURL, role string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	if err := EnableLogin(ctx, connect(t, ownerURL), role, ""); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(ownerURL)
	u.User = url.User(role)
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatalf("connect as %s: %v", role, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestServiceRoleGrants(t *testing.T) {
	t.Parallel()
	dbURL := migrated(t)
	ctx := context.Background()
	conn := connect(t, dbURL)

	// Partitions are reached through their parent, whose grants these are:
	// no service role holds any privilege on a partition itself.
	rows, err := conn.Query(ctx, `SELECT t.tablename, c.relispartition FROM pg_tables t
		JOIN pg_class c ON c.oid = format('%I.%I', t.schemaname, t.tablename)::regclass
		WHERE t.schemaname = 'public' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type listed struct {
		Name      string
		Partition bool
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[listed])
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for _, l := range all {
		if !l.Partition {
			tables = append(tables, l.Name)
			continue
		}
		for _, role := range ServiceRoles() {
			var holds bool
			if err := conn.QueryRow(ctx, `SELECT has_any_column_privilege($1, $2, 'SELECT,INSERT,UPDATE,REFERENCES')
				OR has_table_privilege($1, $2, 'DELETE,TRUNCATE,TRIGGER')`, role, "public."+l.Name).Scan(&holds); err != nil {
				t.Fatal(err)
			}
			if holds {
				t.Errorf("%s holds privileges on the partition %s: grant the parent, not its partitions", role, l.Name)
			}
		}
	}
	for _, table := range tables {
		want, ok := wantGrants[table]
		if !ok {
			t.Errorf("table %s has no line in wantGrants (and docs/design/architecture.md): grant it to the roles that use it", table)
			continue
		}
		for _, role := range ServiceRoles() {
			var got string
			err := conn.QueryRow(ctx, `
				SELECT concat(
				    CASE WHEN has_table_privilege($1, $2, 'SELECT') THEN 'S' END,
				    CASE WHEN has_table_privilege($1, $2, 'INSERT') THEN 'I' END,
				    CASE WHEN has_table_privilege($1, $2, 'UPDATE') THEN 'U' END,
				    CASE WHEN has_table_privilege($1, $2, 'DELETE') THEN 'D' END,
				    CASE WHEN has_table_privilege($1, $2, 'TRUNCATE') THEN 'T' END,
				    CASE WHEN has_table_privilege($1, $2, 'REFERENCES') THEN 'R' END,
				    CASE WHEN has_table_privilege($1, $2, 'TRIGGER') THEN 'G' END,
				    CASE WHEN NOT has_table_privilege($1, $2, 'SELECT')
				          AND has_any_column_privilege($1, $2, 'SELECT') THEN
				        CASE WHEN has_column_privilege($1, $2, 'id', 'SELECT') THEN 'i' ELSE '?' END END,
				    CASE WHEN NOT has_table_privilege($1, $2, 'UPDATE')
				          AND has_any_column_privilege($1, $2, 'UPDATE') THEN 'u' END)`, role, "public."+table).Scan(&got)
			if err != nil {
				t.Fatal(err)
			}
			if got != want[role] {
				t.Errorf("%s on %s: has %q, want %q", role, table, got, want[role])
			}
		}
	}
	for table := range wantGrants {
		if !slices.Contains(tables, table) {
			t.Errorf("wantGrants lists %s, which the migrations do not create", table)
		}
	}

	// A role reads a table it does not write only through a view (but for
	// the previous release's privileges, until the contract revokes
	// ContractNext and ContractNextWrites).
	if bad := readsWithoutView(wantGrants, ContractNext(), ContractNextWrites()); len(bad) > 0 {
		t.Errorf("after the contract, roles read tables they do not write: give each a view of the columns it needs (wantViews): %v", bad)
	}
	for name, list := range map[string]map[string]map[string]string{"ContractNext": ContractNext(), "ContractNextWrites": ContractNextWrites()} {
		for role, tables := range list {
			for table, verbs := range tables {
				for _, v := range verbs {
					if !strings.ContainsRune(wantGrants[table][role], v) {
						t.Errorf("%s lists %s holding %c on %s, which wantGrants does not have: drop it from %s", name, role, v, table, name)
					}
				}
			}
		}
	}

	rows, err = conn.Query(ctx, `SELECT viewname FROM pg_views WHERE schemaname = 'public' ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	views, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, view := range views {
		readers, ok := wantViews[view]
		if !ok {
			t.Errorf("view %s has no line in wantViews (and docs/design/architecture.md)", view)
			continue
		}
		for _, role := range ServiceRoles() {
			var got string
			err := conn.QueryRow(ctx, `
				SELECT concat(
				    CASE WHEN has_table_privilege($1, $2, 'SELECT') THEN 'S' END,
				    CASE WHEN has_table_privilege($1, $2, 'INSERT') THEN 'I' END,
				    CASE WHEN has_table_privilege($1, $2, 'UPDATE') THEN 'U' END,
				    CASE WHEN has_table_privilege($1, $2, 'DELETE') THEN 'D' END,
				    CASE WHEN has_table_privilege($1, $2, 'TRUNCATE') THEN 'T' END,
				    CASE WHEN has_table_privilege($1, $2, 'REFERENCES') THEN 'R' END,
				    CASE WHEN has_table_privilege($1, $2, 'TRIGGER') THEN 'G' END)`, role, "public."+view).Scan(&got)
			if err != nil {
				t.Fatal(err)
			}
			want := ""
			if slices.Contains(readers, role) {
				want = "S"
			}
			if got != want {
				t.Errorf("%s on view %s: has %q, want %q", role, view, got, want)
			}
		}
	}
	for view := range wantViews {
		if !slices.Contains(views, view) {
			t.Errorf("wantViews lists %s, which the migrations do not create", view)
		}
	}

	rows, err = conn.Query(ctx, `
		SELECT p.oid::regprocedure::text,
		       p.proowner = (SELECT relowner FROM pg_class WHERE oid = 'public.schema_migrations'::regclass),
		       coalesce(EXISTS (SELECT 1 FROM unnest(p.proconfig) c WHERE c LIKE 'search\_path=%'), false)
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = 'public' AND p.prosecdef ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	type definer struct {
		Signature       string
		ByOwner, Pinned bool
	}
	definers, err := pgx.CollectRows(rows, pgx.RowToStructByPos[definer])
	if err != nil {
		t.Fatal(err)
	}
	var signatures []string
	for _, f := range definers {
		signatures = append(signatures, f.Signature)
		callers, ok := wantFunctions[f.Signature]
		if !ok {
			t.Errorf("SECURITY DEFINER function %s has no line in wantFunctions (and docs/design/architecture.md)", f.Signature)
			continue
		}
		if !f.ByOwner {
			t.Errorf("function %s is not owned by the schema owner", f.Signature)
		}
		if !f.Pinned {
			t.Errorf("function %s runs with its caller's search_path: SET search_path = public, pg_temp", f.Signature)
		}
		var public bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
			WHERE p.oid = $1::regprocedure AND a.grantee = 0 AND a.privilege_type = 'EXECUTE')`, f.Signature).Scan(&public); err != nil {
			t.Fatal(err)
		}
		if public {
			t.Errorf("PUBLIC may execute %s: REVOKE EXECUTE ... FROM PUBLIC", f.Signature)
		}
		for _, role := range ServiceRoles() {
			var got bool
			if err := conn.QueryRow(ctx, `SELECT has_function_privilege($1, $2, 'EXECUTE')`, role, f.Signature).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if want := slices.Contains(callers, role); got != want {
				t.Errorf("%s EXECUTE on %s: has %v, want %v", role, f.Signature, got, want)
			}
		}
	}
	for f := range wantFunctions {
		if !slices.Contains(signatures, f) {
			t.Errorf("wantFunctions lists %s, which the migrations do not create as SECURITY DEFINER", f)
		}
	}

	// No service role may create objects in the schema.
	for _, role := range ServiceRoles() {
		var create bool
		if err := conn.QueryRow(ctx, `SELECT has_schema_privilege($1, 'public', 'CREATE')`, role).Scan(&create); err != nil {
			t.Fatal(err)
		}
		if create {
			t.Errorf("%s may CREATE in schema public", role)
		}
	}
}

// readsWithoutView returns "role table" for each table a role may still
// read once the privileges in contract are revoked but does not write:
// such a read must go through a view.
func readsWithoutView(grants map[string]map[string]string, contract ...map[string]map[string]string) []string {
	var bad []string
	for table, roles := range grants {
		for role, verbs := range roles {
			after := strings.Map(func(r rune) rune {
				for _, c := range contract {
					if strings.ContainsRune(c[role][table], r) {
						return -1
					}
				}
				return r
			}, verbs)
			if strings.Contains(after, "S") && !strings.ContainsAny(after, "IUDiu") {
				bad = append(bad, role+" "+table)
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// The view rule counts the contract's revoked writes: a role whose writes
// of a table the contract revokes and whose SELECT it keeps reads the table
// directly afterwards (webhook-api on payouts, had 000035 not moved its
// reads to views).
func TestViewRuleAfterTheContract(t *testing.T) {
	t.Parallel()
	reads := ContractNext()
	delete(reads[RoleWebhookAPI], "payouts")
	delete(reads[RoleWebhookAPI], "payout_transitions")
	got := readsWithoutView(wantGrants, reads, ContractNextWrites())
	want := []string{RoleWebhookAPI + " payout_transitions", RoleWebhookAPI + " payouts"}
	if !slices.Equal(got, want) {
		t.Errorf("without webhook-api's reads of payouts in the contract: %v, want %v", got, want)
	}
	if got := readsWithoutView(wantGrants, ContractNext(), ContractNextWrites()); len(got) > 0 {
		t.Errorf("after the whole contract: %v, want none", got)
	}
}

// must runs sql and fails t if it fails.
func must(t *testing.T, conn *pgx.Conn, what, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Errorf("%s must be allowed: %v", what, err)
	}
}

// refused runs sql and fails t unless Postgres refuses it for lack of
// privilege (42501).
func refused(t *testing.T, conn *pgx.Conn, what, sql string, args ...any) {
	t.Helper()
	_, err := conn.Exec(context.Background(), sql, args...)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Errorf("%s must be refused with 42501 insufficient_privilege, got %v", what, err)
	}
}

// undefined runs sql and fails t unless Postgres refuses it for naming a
// column that does not exist (42703): what a view leaves out.
func undefined(t *testing.T, conn *pgx.Conn, what, sql string, args ...any) {
	t.Helper()
	_, err := conn.Exec(context.Background(), sql, args...)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42703" {
		t.Errorf("%s must be refused with 42703 undefined_column, got %v", what, err)
	}
}

const (
	insertOutbox = `INSERT INTO transaction_outbox (topic, event_type, partition_key, payload)
		VALUES ('aegis.transactions', 'payout.requested', $1, '{}') RETURNING id`
	insertLetter = `INSERT INTO dead_letters (source, original_topic, payload, error, error_class)
		VALUES ('relay', 'aegis.transactions', '\x7b7d', 'test', 'permanent') ON CONFLICT DO NOTHING RETURNING id`
	insertEvent = `INSERT INTO webhook_events (provider, event_id, event_type, payload, correlation_id)
		VALUES ('stripe', $1, 'payment_intent.succeeded', '{}', 'c') RETURNING id`
	insertProcessed = `INSERT INTO processed_events (consumer_group, event_id) VALUES ('g', $1)`
	insertAudit     = `INSERT INTO audit_log (actor, action, target_type, target_id) VALUES ('ops', 'test', 'letter', '1') RETURNING id`
)

// Each service's role can do what its service must and cannot write a table
// that belongs to another: Postgres answers 42501.
func TestServiceRolesCannotWriteWhatTheyDoNotOwn(t *testing.T) {
	t.Parallel()
	dbURL := migrated(t)

	t.Run("webhook-api", func(t *testing.T) {
		c := asRole(t, dbURL, RoleWebhookAPI)
		must(t, c, "storing a PSP event", insertEvent, "evt_roles_1")
		must(t, c, "writing the outbox", insertOutbox, "user:alice")
		must(t, c, "storing an ingest dead letter", insertLetter)
		must(t, c, "reading balances", `SELECT count(*) FROM wallets_for_api w JOIN ledger_entries_for_api e ON e.wallet_id = w.id`)
		must(t, c, "reading a payout's PSP calls through its view", `SELECT attempt FROM payout_attempts_for_api`)
		refused(t, c, "posting to the ledger", `INSERT INTO wallets (kind, owner, currency) VALUES ('user', 'alice', 'usd')`)
		refused(t, c, "marking an event processed", insertProcessed, "x")
		refused(t, c, "claiming outbox rows", `UPDATE transaction_outbox SET status = 'processing'`)
		refused(t, c, "reading the outbox", `SELECT payload FROM transaction_outbox`)
		refused(t, c, "reading dead letters", `SELECT payload FROM dead_letters`)
		refused(t, c, "writing the audit log", insertAudit)
		refused(t, c, "deleting an event", `DELETE FROM webhook_events`)
	})
	t.Run("outbox-relay", func(t *testing.T) {
		c := asRole(t, dbURL, RoleOutboxRelay)
		must(t, c, "claiming outbox rows", `UPDATE transaction_outbox SET status = 'processing', locked_by = 'r' WHERE status = 'pending' RETURNING id, payload`)
		must(t, c, "pruning published rows", `DELETE FROM transaction_outbox WHERE status = 'processed'`)
		must(t, c, "dead-lettering a row", insertLetter)
		refused(t, c, "writing the outbox", insertOutbox, "user:bob")
		refused(t, c, "storing a PSP event", insertEvent, "evt_roles_2")
		refused(t, c, "updating a payout", `UPDATE payouts SET status = 'FINALIZED'`)
		refused(t, c, "reading wallets", `SELECT * FROM wallets`)
		refused(t, c, "resolving a dead letter", `UPDATE dead_letters SET status = 'discarded'`)
	})
	t.Run("payout-worker", func(t *testing.T) {
		c := asRole(t, dbURL, RolePayoutWorker)
		must(t, c, "marking an event processed", insertProcessed, "evt_roles_3")
		must(t, c, "creating a wallet", `INSERT INTO wallets (kind, owner, currency) VALUES ('user', 'carol', 'usd') ON CONFLICT (kind, owner, currency) DO NOTHING`)
		must(t, c, "locking a wallet", `SELECT balance FROM wallets WHERE owner = 'carol' FOR UPDATE`)
		must(t, c, "moving a balance", `UPDATE wallets SET balance = balance + 1, version = version + 1 WHERE owner = 'carol'`)
		must(t, c, "writing the outbox", insertOutbox, "user:carol")
		must(t, c, "dead-lettering a message", insertLetter)
		refused(t, c, "storing a PSP event", insertEvent, "evt_roles_4")
		refused(t, c, "creating a payout", `INSERT INTO payouts (id) VALUES (gen_random_uuid())`)
		refused(t, c, "registering a destination", `UPDATE destinations SET status = 'disabled'`)
		refused(t, c, "writing the audit log", insertAudit)
		refused(t, c, "changing posted ledger entries", `UPDATE ledger_entries SET amount = 0`)
		refused(t, c, "deleting processed events", `DELETE FROM processed_events`)
		must(t, c, "reading resolutions through its view", `SELECT status, outcome, psp_object_id FROM payout_resolutions_for_worker`)
		undefined(t, c, "reading a resolution's outbox id through its view", `SELECT outbox_id FROM payout_resolutions_for_worker`)
	})
	t.Run("dlq-admin", func(t *testing.T) {
		c := asRole(t, dbURL, RoleDLQAdmin)
		must(t, c, "writing the audit log", insertAudit)
		must(t, c, "storing a dead letter", insertLetter)
		must(t, c, "resolving dead letters", `UPDATE dead_letters SET status = 'discarded', resolved_at = now() WHERE status = 'open'`)
		must(t, c, "replaying into the outbox", insertOutbox, "user:dave")
		must(t, c, "reconciling the ledger", `SELECT count(*) FROM ledger_entries_for_ops JOIN ledger_transactions_for_ops t ON t.id = transaction_id`)
		must(t, c, "reading payouts through its view", `SELECT status FROM payouts_for_ops`)
		undefined(t, c, "reading a payout's idempotency key through its view", `SELECT idempotency_key FROM payouts_for_ops`)
		refused(t, c, "marking an event processed", insertProcessed, "evt_roles_5")
		refused(t, c, "moving a balance", `UPDATE wallets SET balance = balance + 1`)
		refused(t, c, "changing a payout", `UPDATE payouts SET status = 'FINALIZED'`)
		refused(t, c, "storing a PSP event", insertEvent, "evt_roles_6")
		refused(t, c, "claiming outbox rows", `UPDATE transaction_outbox SET status = 'processing'`)
		refused(t, c, "deleting the audit log", `DELETE FROM audit_log`)
		must(t, c, "reading resolutions with their verdicts", `SELECT status, psp_answer, decided_at FROM payout_resolutions_state`)
		must(t, c, "reading verdicts through its view", `SELECT status FROM resolution_verdicts_for_ops`)
		must(t, c, "closing decided resolutions", `UPDATE payout_resolutions r SET status = v.status
			FROM resolution_verdicts_for_ops v WHERE v.resolution_id = r.id AND r.status = 'pending'`)
		refused(t, c, "recording a verdict", `INSERT INTO resolution_verdicts (resolution_id, status, psp_answer, decided_at)
			VALUES (gen_random_uuid(), 'applied', 'a', now())`)
		refused(t, c, "changing a verdict", `UPDATE resolution_verdicts SET status = 'applied'`)
		must(t, c, "queueing a River job", `INSERT INTO river_job (kind, args, queue, state, max_attempts) VALUES ('t', '{}', 'default', 'available', 1) RETURNING id`)
		must(t, c, "cleaning River jobs", `DELETE FROM river_job WHERE kind = 't'`)
		refused(t, c, "changing River's schema version", `DELETE FROM river_migration`)
	})
	t.Run("PSP reconciliation runs change only through webhook-api's functions", func(t *testing.T) {
		ops := asRole(t, dbURL, RoleDLQAdmin)
		must(t, ops, "requesting a run", `SELECT request_psp_reconciliation_run('ops')`)
		must(t, ops, "reading runs through the view", `SELECT status FROM psp_reconciliation_runs_for_ops`)
		undefined(t, ops, "reading a run's lease through the view", `SELECT locked_by FROM psp_reconciliation_runs_for_ops`)
		must(t, ops, "ending an orphaned run", `SELECT end_orphaned_psp_run(max(id), 'its job is gone') FROM psp_reconciliation_runs_for_ops`)
		api := asRole(t, dbURL, RoleWebhookAPI)
		must(t, api, "ending an orphaned run (the schedule)", `SELECT end_orphaned_psp_run(1, 'its job is gone')`)
		refused(t, api, "requesting a manual run", `SELECT request_psp_reconciliation_run('ops')`)
		refused(t, api, "claiming a run's alert", `INSERT INTO psp_run_alerts (run_id) VALUES (1)`)
		for _, role := range []string{RoleOutboxRelay, RolePayoutWorker} {
			c := asRole(t, dbURL, role)
			refused(t, c, role+" requesting a run", `SELECT request_psp_reconciliation_run('x')`)
			refused(t, c, role+" ending a run", `SELECT end_orphaned_psp_run(1, 'x')`)
			refused(t, c, role+" reading runs", `SELECT status FROM psp_reconciliation_runs_for_ops`)
		}
	})
	t.Run("webhook-api works the PSP reconciliation's River jobs", func(t *testing.T) {
		c := asRole(t, dbURL, RoleWebhookAPI)
		must(t, c, "queueing a River job", `INSERT INTO river_job (kind, args, queue, state, max_attempts) VALUES ('t', '{}', 'psp_reconcile', 'available', 1) RETURNING id`)
		must(t, c, "completing a River job", `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE kind = 't'`)
		must(t, c, "cleaning River jobs", `DELETE FROM river_job WHERE kind = 't'`)
		refused(t, c, "changing River's schema version", `DELETE FROM river_migration`)
	})
	t.Run("others work no River jobs", func(t *testing.T) {
		for _, role := range []string{RoleOutboxRelay, RolePayoutWorker} {
			c := asRole(t, dbURL, role)
			refused(t, c, role+" queueing a River job", `INSERT INTO river_job (kind, args) VALUES ('t', '{}')`)
		}
	})
}

// dlq-admin's role may write a money event to the outbox only as the
// replay of an open dead letter, unchanged (000024); its other outbox rows
// (payout resolutions, replays on other topics) and the writers of money
// events (webhook-api, payout-worker) are not held back.
func TestDLQAdminWritesMoneyEventsOnlyAsReplays(t *testing.T) {
	t.Parallel()
	dbURL := migrated(t)
	ctx := context.Background()
	owner := connect(t, dbURL)
	const credit = `{"provider":"stripe","event_id":"evt_1","action":"credit","user_id":"alice","amount":500,"currency":"usd"}`
	var open, replayed int64
	letter := `INSERT INTO dead_letters (source, original_topic, partition_key, payload, headers, error, error_class, status, resolved_at)
		VALUES ('consumer', 'aegis.webhook.pending', 'alice', convert_to($1, 'UTF8'), '{"aegis-event-proof":"v1:k:s"}', 'e', 'permanent', $2, $3) RETURNING id`
	if err := owner.QueryRow(ctx, letter, credit, "open", nil).Scan(&open); err != nil {
		t.Fatal(err)
	}
	if err := owner.QueryRow(ctx, letter, credit, "replayed", time.Now()).Scan(&replayed); err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO transaction_outbox (topic, event_type, partition_key, payload, headers)
		VALUES ($1, 'payment_intent.succeeded', $2, $3::jsonb, $4::jsonb) RETURNING id`
	hdr := func(replayOf int64, proof string) string {
		return fmt.Sprintf(`{"replay_of":"%d","replay_count":"1","message_id":"m","aegis-event-proof":%q}`, replayOf, proof)
	}
	forged := `{"provider":"stripe","event_id":"evt_1","action":"credit","user_id":"alice","amount":900000,"currency":"usd"}`

	c := asRole(t, dbURL, RoleDLQAdmin)
	refused(t, c, "writing a money event", insert, "aegis.webhook.pending", "alice", credit, `{}`)
	refused(t, c, "a replay of no letter", insert, "aegis.webhook.pending", "alice", credit, hdr(999999, "v1:k:s"))
	refused(t, c, "a replay with another payload", insert, "aegis.webhook.pending", "alice", forged, hdr(open, "v1:k:s"))
	refused(t, c, "a replay with another proof", insert, "aegis.webhook.pending", "alice", credit, hdr(open, "v1:k:other"))
	refused(t, c, "a replay to another wallet's partition", insert, "aegis.webhook.pending", "mallory", credit, hdr(open, "v1:k:s"))
	refused(t, c, "a replay of a letter already replayed", insert, "aegis.webhook.pending", "alice", credit, hdr(replayed, "v1:k:s"))
	must(t, c, "replaying an open letter unchanged (jsonb equality, not bytes)", insert, "aegis.webhook.pending", "alice",
		`{"currency":"usd", "amount":500,"user_id":"alice","action":"credit","event_id":"evt_1","provider":"stripe"}`, hdr(open, "v1:k:s"))
	must(t, c, "sending a payout resolution", insert, "aegis.transactions", "alice", `{"resolution_id":"r"}`, `{}`)

	for _, role := range []string{RoleWebhookAPI, RolePayoutWorker} {
		must(t, asRole(t, dbURL, role), role+" writing a money event", insert, "aegis.webhook.pending", "alice", credit, `{}`)
	}
	must(t, owner, "the owner writing a money event", insert, "aegis.webhook.pending", "alice", credit, `{}`)
}

// EnableLogin with a password sets it, quoting whatever it holds; the
// password is never in the error text.
func TestEnableLoginQuotesThePassword(t *testing.T) {
	t.Parallel()
	dbURL := migrated(t)
	ctx := context.Background()
	conn := connect(t, dbURL)
	// A role of this test's own: the service roles are shared by every
	// database of the cluster, and their passwords are not this test's.
	role := fmt.Sprintf("aegis_roles_test_%d", time.Now().UnixNano())
	if _, err := conn.Exec(ctx, "CREATE ROLE "+role+" NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	if err := EnableLogin(ctx, conn, role, `it's "odd"; DROP ROLE x`); err != nil {
		t.Fatalf("EnableLogin: %v", err)
	}
	var canLogin, hasPassword bool
	if err := conn.QueryRow(ctx, `SELECT rolcanlogin, rolpassword IS NOT NULL FROM pg_authid WHERE rolname = $1`, role).Scan(&canLogin, &hasPassword); err != nil {
		t.Fatal(err)
	}
	if !canLogin || !hasPassword {
		t.Fatalf("after EnableLogin: login %v, password set %v", canLogin, hasPassword)
	}
	err := EnableLogin(ctx, conn, "aegis_no_such_role", "secret-pw")
	if err == nil || !strings.Contains(err.Error(), "no such role") || strings.Contains(err.Error(), "secret-pw") {
		t.Fatalf("EnableLogin of a missing role: %v", err)
	}
}

// The migration's role creation is safe when many databases of one cluster
// migrate at once (tests create a database per test): its DO block, run
// for one new role from many connections together, succeeds on every one.
func TestRoleCreationIsSafeConcurrently(t *testing.T) {
	t.Parallel()
	dbURL := migrated(t)
	up, err := FS.ReadFile("000016_service_roles.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	src := string(up)
	start := strings.Index(src, "DO $$")
	end := strings.Index(src[start:], "$$;") + start + len("$$;")
	list := "ARRAY['aegis_webhook_api', 'aegis_outbox_relay', 'aegis_payout_worker', 'aegis_dlq_admin']"
	if start < 0 || !strings.Contains(src[start:end], list) {
		t.Fatalf("000016 has no DO block creating %s", list)
	}
	role := fmt.Sprintf("aegis_roles_race_%d", time.Now().UnixNano())
	block := strings.Replace(src[start:end], list, "ARRAY['"+role+"']", 1)

	ctx := context.Background()
	const n = 8
	conns := make([]*pgx.Conn, n)
	for i := range conns {
		c, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		conns[i] = c
	}
	defer func() { _, _ = conns[0].Exec(context.Background(), "DROP ROLE IF EXISTS "+role) }()
	ready := make(chan struct{})
	errs := make(chan error, n)
	for _, c := range conns {
		go func() {
			<-ready
			_, err := c.Exec(ctx, block)
			errs <- err
		}()
	}
	close(ready)
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("concurrent role creation: %v", err)
		}
	}
	var exists bool
	if err := conns[0].QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1 AND NOT rolcanlogin)`, role).Scan(&exists); err != nil || !exists {
		t.Fatalf("NOLOGIN role %s after the race: %v %v", role, exists, err)
	}
}
