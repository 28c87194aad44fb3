package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aegis-payments/aegis/pkg/outbox"
)

// Plan changes on the hot statements. Every sample, the soak EXPLAINs
// each statement below, as the service sends it: its text is the
// sqlc-generated constant read from the source tree (generatedStatements,
// as the credit baseline reads it), never retyped, and its parameters are
// bound as the service binds them (extended protocol), with representative
// values. EXPLAIN without ANALYZE runs nothing. Each plan is reduced to its
// shape (node types, relations, indexes, join types and how nodes hang
// together; no costs, row counts or parameter values) and fingerprinted; a
// fingerprint that differs from the statement's previous one is a plan
// change, reported with both shapes.
//
// Why not auto_explain: it needs the server's log (this machine's
// Postgres is shared, its log is not the soak's to read) and logs only
// the statements slower than its threshold, so a plan that changed and
// stayed fast goes unseen, and what is seen depends on timing. A periodic
// EXPLAIN sees every hot statement at every sample, deterministically for
// the same statistics.
//
// Two plans per statement: the custom plan for the representative values,
// and the generic plan (PREPARE, then EXPLAIN EXECUTE under
// plan_cache_mode = force_generic_plan: it does not depend on the values,
// so they are NULLs). The services prepare their statements (pgx's
// statement cache), and after five executions Postgres may run the generic
// plan instead of planning each call: which one a service runs is
// Postgres's choice by cost, so both are watched.

// hotStatement is one statement whose plan the soak watches: the service
// that sends it, the generated file and the method that sends it, and the
// session settings the service's pool runs it with (they are the
// planner's too: the relay's pool turns bitmap scans and sorts off).
type hotStatement struct {
	Service, File, Method string
	Settings              map[string]string
}

// The generated files of the hot statements, from the repository root.
var (
	outboxQueries = filepath.Join("pkg", "outbox", "sqlcdb", "queries.sql.go")
	ingestQueries = filepath.Join("services", "webhook-api", "internal", "ingest", "sqlcdb", "queries.sql.go")
	ledgerQueries = filepath.Join("services", "payout-worker", "internal", "ledger", "sqlcdb", "queries.sql.go")
)

// hotStatements are the statements every credit goes through: ingest's
// inserts (the event, its outbox row), the relay's claim and the delete
// that settles a published batch, and the worker's credit batch
// (creditStatements).
var hotStatements = []hotStatement{
	{"webhook-api", ingestQueries, "InsertEvents", nil},
	{"webhook-api", outboxQueries, "InsertMessages", nil},
	{"outbox-relay", outboxQueries, "Claim", outbox.StoreSettings()},
	{"outbox-relay", outboxQueries, "DeletePublished", outbox.StoreSettings()},
	{"payout-worker", ledgerQueries, "CreditClaim", nil},
	{"payout-worker", ledgerQueries, "CreditWallet", nil},
	{"payout-worker", ledgerQueries, "CreditEntries", nil},
	{"payout-worker", ledgerQueries, "Repay", nil},
}

// planValues are the representative values of the hot statements'
// parameters at one sample, by the field name of the generated Params
// struct (a name means the same thing in every statement that has it).
type planValues struct {
	Now time.Time
	// MaxOutboxID is the newest outbox row's id: DeletePublished settles
	// the ids of a batch just claimed.
	MaxOutboxID int64
	// ClearingID is the PSP clearing wallet the credits come from.
	ClearingID int64
	// TxID is a credit transaction id (a UUIDv7, as the worker makes).
	TxID string
}

// values maps each parameter field of the hot statements to its value.
func (v planValues) values() map[string]any {
	const user, event = "e2e-user-1", "evt_soak_explain"
	ids := make([]int64, 0, 100)
	for id := max(1, v.MaxOutboxID-99); id <= max(1, v.MaxOutboxID); id++ {
		ids = append(ids, id)
	}
	return map[string]any{
		// Ingest: one event of a group, its outbox row.
		"Providers": []string{"stripe"}, "EventIDs": []string{event}, "EventTypes": []string{"payment_intent.succeeded"},
		"ObjectIDs": []string{"pi_" + event}, "UserIDs": []string{user}, "Amounts": []int64{5000}, "Currencies": []string{"usd"},
		"OccurredAts": []time.Time{v.Now}, "Payloads": []string{`{}`}, "CorrelationIDs": []string{""},
		"Statuses": []string{"succeeded"}, "ReceivedAt": v.Now, "Topics": []string{"aegis.webhook.pending"}, "PartitionKeys": []string{user},
		"Headers": []string{`{}`}, "MaxRetries": []int32{6}, "NextRetryAts": []time.Time{v.Now},
		// The relay: its default batch, lease and purge batch; its claim
		// window from the front (outbox.Cursor's zero value).
		"Owner": "soak-explain", "LockedUntil": v.Now.Add(time.Minute), "Now": v.Now, "Batch": 2000, "IDs": ids,
		"After": int64(0), "Scan": outbox.ClaimWindow(2000),
		// The worker's credit batch.
		"ConsumerGroup": "payout-worker", "EventID": event, "TxID": v.TxID, "CreditTx": v.TxID,
		"Reference": "stripe:pi_" + event, "CorrelationID": "", "UserID": user, "Currency": "usd", "Amount": int64(5000),
		"ClearingID": v.ClearingID,
	}
}

// explainStatement is a hot statement ready to explain: its text and its
// arguments in $1, $2, … order.
type explainStatement struct {
	hotStatement
	SQL  string
	Args []any
}

// explainStatements reads each hot statement from the generated code
// under repo and binds its parameters from values; a statement or a
// parameter it cannot find is an error (the code changed: update
// hotStatements or planValues).
func explainStatements(repo string, values map[string]any) ([]explainStatement, error) {
	files := map[string]map[string]statement{}
	var out []explainStatement
	for _, h := range hotStatements {
		stmts, ok := files[h.File]
		if !ok {
			var err error
			if stmts, err = generatedStatements(filepath.Join(repo, h.File)); err != nil {
				return nil, err
			}
			files[h.File] = stmts
		}
		st, ok := stmts[h.Method]
		if !ok {
			return nil, fmt.Errorf("%s: no method %s (update hotStatements)", h.File, h.Method)
		}
		es := explainStatement{hotStatement: h, SQL: st.sql}
		for _, a := range st.args {
			v, ok := values[a]
			if !ok {
				return nil, fmt.Errorf("%s %s: parameter %s has no representative value (update planValues)", h.File, h.Method, a)
			}
			es.Args = append(es.Args, v)
		}
		if n := maxParam(st.sql); n != len(es.Args) {
			return nil, fmt.Errorf("%s %s: the statement uses $%d, its call passes %d arguments", h.File, h.Method, n, len(es.Args))
		}
		out = append(out, es)
	}
	return out, nil
}

var paramRef = regexp.MustCompile(`\$([0-9]+)`)

// maxParam is the highest $n in sql.
func maxParam(sql string) int {
	n := 0
	for _, m := range paramRef.FindAllStringSubmatch(sql, -1) {
		var i int
		_, _ = fmt.Sscanf(m[1], "%d", &i)
		n = max(n, i)
	}
	return n
}

// planNode is one node of EXPLAIN (FORMAT JSON)'s plan: the fields that
// make its shape.
type planNode struct {
	NodeType           string     `json:"Node Type"`
	Operation          string     `json:"Operation"`
	Strategy           string     `json:"Strategy"`
	JoinType           string     `json:"Join Type"`
	RelationName       string     `json:"Relation Name"`
	IndexName          string     `json:"Index Name"`
	ScanDirection      string     `json:"Scan Direction"`
	ParentRelationship string     `json:"Parent Relationship"`
	SubplanName        string     `json:"Subplan Name"`
	CTEName            string     `json:"CTE Name"`
	Plans              []planNode `json:"Plans"`
}

// planShape renders EXPLAIN (FORMAT JSON)'s output as an indented tree of
// the nodes' shapes, one line per node, and its fingerprint (the first 12
// hex digits of the shape's SHA-256).
func planShape(explainJSON []byte) (shape, fingerprint string, err error) {
	var doc []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(explainJSON, &doc); err != nil {
		return "", "", fmt.Errorf("read the plan: %w", err)
	}
	if len(doc) != 1 {
		return "", "", fmt.Errorf("read the plan: %d plans, want 1", len(doc))
	}
	var b strings.Builder
	var walk func(n planNode, depth int)
	walk = func(n planNode, depth int) {
		b.WriteString(strings.Repeat("  ", depth))
		if depth > 0 {
			b.WriteString("-> ")
		}
		b.WriteString(n.NodeType)
		if n.Operation != "" && n.NodeType == "ModifyTable" {
			b.WriteString(" " + n.Operation)
		}
		if n.Strategy != "" && n.Strategy != "Plain" {
			b.WriteString(" (" + n.Strategy + ")")
		}
		if n.JoinType != "" && n.JoinType != "Inner" {
			b.WriteString(" " + n.JoinType)
		}
		if n.ScanDirection == "Backward" {
			b.WriteString(" Backward")
		}
		if n.IndexName != "" {
			b.WriteString(" using " + n.IndexName)
		}
		if n.RelationName != "" {
			b.WriteString(" on " + n.RelationName)
		}
		if n.CTEName != "" {
			b.WriteString(" on CTE " + n.CTEName)
		}
		var role []string
		if n.ParentRelationship != "" && n.ParentRelationship != "Outer" && n.ParentRelationship != "Inner" {
			role = append(role, n.ParentRelationship)
		}
		if n.SubplanName != "" {
			role = append(role, n.SubplanName)
		}
		if len(role) > 0 {
			b.WriteString(" [" + strings.Join(role, ": ") + "]")
		}
		b.WriteString("\n")
		for _, c := range n.Plans {
			walk(c, depth+1)
		}
	}
	walk(doc[0].Plan, 0)
	shape = b.String()
	sum := sha256.Sum256([]byte(shape))
	return shape, hex.EncodeToString(sum[:])[:12], nil
}

// planSeen is one observation of a statement's plan.
type planSeen struct {
	At                 time.Duration
	Fingerprint, Shape string
}

// Plan kinds: the custom plan for the values given, or the generic plan.
const (
	planCustom  = "custom"
	planGeneric = "generic"
)

// planHistory is what the soak saw of one hot statement's plan of one kind.
type planHistory struct {
	hotStatement
	Kind string
	// Seen holds the first observation and each one whose fingerprint
	// differs from the one before (a change); Samples counts them all.
	Seen    []planSeen
	Samples int
	// Err is the first error explaining it, if any.
	Err string
}

// Changes is how many times the plan changed.
func (h planHistory) Changes() int { return max(0, len(h.Seen)-1) }

// record adds an observation: kept when it is the first or a change.
func (h *planHistory) record(s planSeen) {
	h.Samples++
	if len(h.Seen) == 0 || h.Seen[len(h.Seen)-1].Fingerprint != s.Fingerprint {
		h.Seen = append(h.Seen, s)
	}
}

// planWatch explains the hot statements of a database at each sample.
type planWatch struct {
	repo    string
	pool    *pgxpool.Pool
	history []planHistory
}

func newPlanWatch(repo string, pool *pgxpool.Pool) *planWatch {
	w := &planWatch{repo: repo, pool: pool}
	for _, h := range hotStatements {
		w.history = append(w.history, planHistory{hotStatement: h, Kind: planCustom}, planHistory{hotStatement: h, Kind: planGeneric})
	}
	return w
}

// sample explains every hot statement once, at (from the soak's start).
func (w *planWatch) sample(ctx context.Context, at time.Duration) error {
	v := planValues{Now: time.Now()}
	tx, err := uuid.NewV7()
	if err != nil {
		return err
	}
	v.TxID = tx.String()
	if err := w.pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM transaction_outbox`).Scan(&v.MaxOutboxID); err != nil {
		return fmt.Errorf("read the newest outbox id: %w", err)
	}
	if err := w.pool.QueryRow(ctx, `SELECT coalesce((SELECT id FROM wallets WHERE kind = 'system' AND owner = 'psp_clearing:stripe' AND currency = 'usd'), 0)`).
		Scan(&v.ClearingID); err != nil {
		return fmt.Errorf("read the clearing wallet: %w", err)
	}
	stmts, err := explainStatements(w.repo, v.values())
	if err != nil {
		return err
	}
	for i, st := range stmts {
		for k, explain := range []func(context.Context, explainStatement) ([]byte, error){w.explainCustom, w.explainGeneric} {
			h := &w.history[2*i+k]
			out, err := explain(ctx, st)
			if err == nil {
				var shape, fp string
				if shape, fp, err = planShape(out); err == nil {
					h.record(planSeen{At: at, Fingerprint: fp, Shape: shape})
					continue
				}
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if h.Err == "" {
				h.Err = err.Error()
			}
		}
	}
	return nil
}

// explainCustom is EXPLAIN of the statement with its values bound (the
// extended protocol, as the service sends it), under its service's
// settings: a custom plan.
func (w *planWatch) explainCustom(ctx context.Context, st explainStatement) ([]byte, error) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := setLocal(ctx, tx, st.Settings); err != nil {
		return nil, err
	}
	var out []byte
	err = tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON, COSTS OFF)\n"+st.SQL, st.Args...).Scan(&out)
	return out, err
}

// setLocal applies settings for the rest of tx.
func setLocal(ctx context.Context, tx pgx.Tx, settings map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		if _, err := tx.Exec(ctx, "SELECT set_config($1, $2, true)", k, settings[k]); err != nil {
			return fmt.Errorf("set %s: %w", k, err)
		}
	}
	return nil
}

// explainGeneric is the statement's generic plan: prepared on one
// connection, explained as EXECUTE with NULLs under force_generic_plan, in
// a transaction rolled back (the setting and the prepared statement go with
// it: DEALLOCATE, as a prepared statement outlives a rollback).
func (w *planWatch) explainGeneric(ctx context.Context, st explainStatement) ([]byte, error) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	const name = "aegis_soak_generic"
	if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		return nil, err
	}
	if err := setLocal(ctx, tx, st.Settings); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, "PREPARE "+name+" AS\n"+st.SQL); err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	nulls := strings.TrimSuffix(strings.Repeat("NULL, ", len(st.Args)), ", ")
	call := name
	if nulls != "" {
		call += "(" + nulls + ")"
	}
	var out []byte
	err = tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON, COSTS OFF) EXECUTE "+call).Scan(&out)
	if _, derr := tx.Exec(ctx, "DEALLOCATE "+name); err == nil && derr != nil {
		err = derr
	}
	return out, err
}
