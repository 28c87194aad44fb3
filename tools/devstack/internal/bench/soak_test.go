package bench

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/aegis-payments/aegis/pkg/pgtest"
)

// A run of at least six windows of five minutes is cut into five-minute
// windows; a shorter one into six.
func TestSoakWindowLength(t *testing.T) {
	for _, c := range []struct{ run, want time.Duration }{
		{time.Hour, 5 * time.Minute},
		{30 * time.Minute, 5 * time.Minute},
		{10 * time.Minute, 100 * time.Second},
		{3 * time.Minute, 30 * time.Second},
		{3 * time.Second, time.Second},
	} {
		if got := windowFor(c.run); got != c.want {
			t.Errorf("windowFor(%s) = %s, want %s", c.run, got, c.want)
		}
	}
}

// Each webhook counts where it happened: offered by its due time,
// acknowledged by its answer's, credited by its credit's (what comes after
// the load in the last window); its latency and errors in its due window.
func TestSoakWindowsCountEachEventInItsWindow(t *testing.T) {
	s := time.Second
	reqs := []soakReq{
		{due: 0, ackAt: s / 10, creditAt: s / 2, answered: true, acked: true, credited: true},
		{due: 5 * s, ackAt: 9 * s, creditAt: 11 * s, answered: true, acked: true, credited: true}, // credited in window 2
		{due: 9 * s, answered: true}, // answered 503: an error of window 1
		{due: 10 * s, ackAt: 10 * s, answered: true, acked: true, credited: false},                  // window 2 starts at 10 s exactly
		{due: 19 * s, ackAt: 25 * s, creditAt: 40 * s, answered: true, acked: true, credited: true}, // drained after the load
	}
	ws := soakWindows(reqs, 10*s, 20*s)
	if len(ws) != 2 {
		t.Fatalf("%d windows, want 2", len(ws))
	}
	w0, w1 := ws[0], ws[1]
	if w0.Offered != 0.3 || w0.Acked != 0.2 || w0.Credited != 0.1 || w0.Errors != 1 || w0.NotCredited != 0 {
		t.Errorf("window 0: %+v", w0)
	}
	if w1.Offered != 0.2 || w1.Acked != 0.2 || w1.Credited != 0.2 || w1.Errors != 0 || w1.NotCredited != 1 {
		t.Errorf("window 1: %+v", w1)
	}
	// Window 0's latencies: 0.5 s and 6 s; window 1's: 21 s.
	if w0.P50 != s/2 || w0.P99 != s/2 {
		// percentile takes the lower of two at p99 of two samples
		t.Errorf("window 0 p50/p99 %s/%s, want 500ms/500ms", w0.P50, w0.P99)
	}
	if w1.P50 != 21*s || w1.P99 != 21*s {
		t.Errorf("window 1 p50/p99 %s/%s, want 21s", w1.P50, w1.P99)
	}
	if w0.Start != 0 || w0.End != 10*s || w1.Start != 10*s || w1.End != 20*s {
		t.Errorf("bounds %s–%s, %s–%s", w0.Start, w0.End, w1.Start, w1.End)
	}
}

// A last window shorter than the others is a rate over its own length.
func TestSoakWindowsLastPartialWindowRate(t *testing.T) {
	s := time.Second
	reqs := []soakReq{{due: 21 * s, ackAt: 21 * s, creditAt: 22 * s, answered: true, acked: true, credited: true}}
	ws := soakWindows(reqs, 10*s, 25*s)
	if len(ws) != 3 || ws[2].End != 25*s || ws[2].Offered != 0.2 || ws[2].Credited != 0.2 {
		t.Fatalf("windows %+v", ws)
	}
}

func TestSoakVerdict(t *testing.T) {
	ms := time.Millisecond
	w := func(credited float64, p99 time.Duration) soakWindow { return soakWindow{Credited: credited, P99: p99} }
	for _, c := range []struct {
		name string
		ws   []soakWindow
		ok   bool
	}{
		{"steady", []soakWindow{w(100, 50*ms), w(80, 900*ms), w(95, 54*ms)}, true},
		{"p99 faster at the end", []soakWindow{w(100, 50*ms), w(100, 20*ms)}, true},
		{"throughput down 11 %", []soakWindow{w(100, 50*ms), w(89, 50*ms)}, false},
		{"p99 up 11 %", []soakWindow{w(100, 50*ms), w(100, 56*ms)}, false},
		{"one window", []soakWindow{w(100, 50*ms)}, false},
		{"errors", []soakWindow{w(100, 50*ms), {Credited: 100, P99: 50 * ms, Errors: 1}}, false},
		{"not credited", []soakWindow{{Credited: 100, P99: 50 * ms, NotCredited: 1}, w(100, 50*ms)}, false},
	} {
		ok, why := soakVerdict(c.ws)
		if ok != c.ok || why == "" {
			t.Errorf("%s: ok %v (%s), want %v", c.name, ok, why, c.ok)
		}
	}
}

// Retention is scaled with what it must outlast, by one factor, so the
// relay's rule (the outbound retentions exceed the retry schedule plus the
// disable window) holds; at scale 1 nothing is set.
func TestSoakRetentionScalesTogether(t *testing.T) {
	settings, err := soakRetentionSettings(SoakTimeScale)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]retentionSetting{}
	for _, s := range settings {
		got[s.Env] = s
		if s.Soak >= s.Real {
			t.Errorf("%s: %s in the soak, not shorter than its default %s", s.Env, s.Soak, s.Real)
		}
	}
	if got["OUTBOUND_LOG_RETENTION"].Value != "15m0s" || got["OUTBOUND_MESSAGE_RETENTION"].Value != "15m0s" {
		t.Errorf("retentions %+v", got)
	}
	var schedule time.Duration
	for _, d := range strings.Split(got["OUTBOUND_RETRY_SCHEDULE"].Value, ",") {
		v, err := time.ParseDuration(d)
		if err != nil {
			t.Fatalf("schedule %q: %v", got["OUTBOUND_RETRY_SCHEDULE"].Value, err)
		}
		schedule += v
	}
	least := schedule + got["OUTBOUND_DISABLE_AFTER"].Soak
	for _, env := range []string{"OUTBOUND_LOG_RETENTION", "OUTBOUND_MESSAGE_RETENTION"} {
		if got[env].Soak <= least {
			t.Errorf("%s %s does not exceed the schedule plus the disable window (%s)", env, got[env].Soak, least)
		}
	}
	if env := retentionEnv(settings, 1); env != nil {
		t.Errorf("scale 1 sets %v", env)
	}
	if env := retentionEnv(settings, SoakTimeScale); env["OUTBOUND_LOG_RETENTION"] != "15m0s" || len(env) != len(soakRetention) {
		t.Errorf("env %v", env)
	}
}

const planJSON = `[{"Plan": {"Node Type": "ModifyTable", "Operation": "Update", "Relation Name": "transaction_outbox",
  "Startup Cost": 1.0, "Plans": [{"Node Type": "Index Scan", "Parent Relationship": "Outer", "Scan Direction": "Forward",
  "Index Name": "transaction_outbox_claim_idx", "Relation Name": "transaction_outbox", "Index Cond": "(id > 0)",
  "Filter": "(next_retry_at <= '2026-11-29 10:00:00+00'::timestamp with time zone)"}]}}]`

// A plan's fingerprint is its shape: costs and the values in its
// conditions do not change it; another index does.
func TestPlanShapeFingerprintsTheShapeOnly(t *testing.T) {
	shape, fp, err := planShape([]byte(planJSON))
	if err != nil {
		t.Fatal(err)
	}
	want := "ModifyTable Update on transaction_outbox\n  -> Index Scan using transaction_outbox_claim_idx on transaction_outbox\n"
	if shape != want {
		t.Fatalf("shape:\n%s\nwant:\n%s", shape, want)
	}
	other := strings.ReplaceAll(strings.ReplaceAll(planJSON, "10:00:00", "11:30:00"), `"Startup Cost": 1.0`, `"Startup Cost": 9.5`)
	if _, fp2, _ := planShape([]byte(other)); fp2 != fp {
		t.Errorf("values and costs changed the fingerprint: %s vs %s", fp, fp2)
	}
	seq := strings.ReplaceAll(strings.ReplaceAll(planJSON, `"Index Scan"`, `"Seq Scan"`), `"Index Name": "transaction_outbox_claim_idx",`, "")
	if _, fp3, _ := planShape([]byte(seq)); fp3 == fp {
		t.Error("a sequential scan in place of the index scan kept the fingerprint")
	}
}

// A plan history keeps the first plan and each change, and counts every
// sample.
func TestPlanHistoryKeepsChanges(t *testing.T) {
	var h planHistory
	for i, fp := range []string{"a", "a", "b", "b", "a"} {
		h.record(planSeen{At: time.Duration(i) * time.Minute, Fingerprint: fp})
	}
	if h.Samples != 5 || h.Changes() != 2 || h.Seen[1].At != 2*time.Minute || h.Seen[2].Fingerprint != "a" {
		t.Fatalf("history %+v", h)
	}
}

// Every hot statement is read from the generated code and EXPLAINs on the
// migrated schema with its representative parameters bound: a statement
// renamed, a parameter added or a type the values cannot bind fails here,
// not in an hour-long soak.
func TestHotStatementsExplainOnTheSchema(t *testing.T) {
	db := pgtest.New(t)
	repo, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	w := newPlanWatch(repo, db.Pool)
	if err := w.sample(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if len(w.history) != 2*len(hotStatements) {
		t.Fatalf("%d histories for %d statements", len(w.history), len(hotStatements))
	}
	kinds := map[string]int{}
	for _, h := range w.history {
		kinds[h.Kind]++
		if h.Err != "" || h.Samples != 1 || len(h.Seen) != 1 || h.Seen[0].Fingerprint == "" {
			t.Errorf("%s (%s), %s plan: %+v", h.Method, h.File, h.Kind, h)
		}
	}
	if kinds[planCustom] != len(hotStatements) || kinds[planGeneric] != len(hotStatements) {
		t.Errorf("plans by kind %v", kinds)
	}
	// A second sample on the same connections: the generic plan's prepared
	// statement did not outlive its transaction.
	if err := w.sample(context.Background(), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, h := range w.history {
		if h.Err != "" || h.Samples != 2 {
			t.Errorf("second sample: %s, %s plan: %+v", h.Method, h.Kind, h)
		}
	}
	// The claim walks the outbox.
	for _, h := range w.history {
		if h.Method == "Claim" && !strings.Contains(h.Seen[0].Shape, "on transaction_outbox") {
			t.Errorf("claim's plan:\n%s", h.Seen[0].Shape)
		}
	}
}

// Sizes and vacuum counters of a partitioned table are its partitions'
// sum, under the parent's name (another helper partitions tables: the
// soak reads them either way); a plain table is itself.
func TestSampleTablesSumsPartitions(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TABLE soak_parted (at date NOT NULL, v text) PARTITION BY RANGE (at)`,
		`CREATE TABLE soak_parted_a PARTITION OF soak_parted FOR VALUES FROM ('2026-01-01') TO ('2026-02-01')`,
		`CREATE TABLE soak_parted_b PARTITION OF soak_parted FOR VALUES FROM ('2026-02-01') TO ('2026-03-01')`,
		`CREATE INDEX ON soak_parted (v)`,
		`INSERT INTO soak_parted SELECT date '2026-01-01' + (i % 59), repeat('x', 200) FROM generate_series(1, 5000) i`,
		`DELETE FROM soak_parted WHERE at < '2026-01-05'`,
		`VACUUM soak_parted_a`,
	} {
		if _, err := db.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s, err := sampleTables(ctx, db.Pool, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var a, b, idx int64
	if err := db.Pool.QueryRow(ctx, `SELECT pg_total_relation_size('soak_parted_a'), pg_total_relation_size('soak_parted_b'),
		pg_indexes_size('soak_parted_a') + pg_indexes_size('soak_parted_b')`).Scan(&a, &b, &idx); err != nil {
		t.Fatal(err)
	}
	got, ok := s.Tables["soak_parted"]
	if !ok {
		t.Fatalf("no soak_parted in %v", s.Tables)
	}
	if got.Total != a+b || got.Index != idx || got.Vacuum != 1 {
		t.Errorf("soak_parted %+v; want total %d, indexes %d, one vacuum", got, a+b, idx)
	}
	for _, leaf := range []string{"soak_parted_a", "soak_parted_b"} {
		if _, ok := s.Tables[leaf]; ok {
			t.Errorf("partition %s listed on its own", leaf)
		}
	}
	if _, ok := s.Tables["ledger_transactions"]; !ok {
		t.Error("plain table ledger_transactions missing")
	}
	// webhook_events is kept by time partition: its partitions are read
	// from the catalog, one a day at scale 1.
	var n int64
	var newest time.Time
	if err := db.Pool.QueryRow(ctx, `SELECT count(*), max(hi) FROM partition_bounds('webhook_events')`).Scan(&n, &newest); err != nil {
		t.Fatal(err)
	}
	if p, ok := s.Partitions["webhook_events"]; !ok || p.Count != n || p.TimeScale != 1 || !p.Newest.Equal(newest) || !p.Oldest.Before(p.Newest) {
		t.Errorf("webhook_events partitions %+v (present %v); want %d partitions up to %s at scale 1", p, ok, n, newest)
	}
}

// The churn of a partitioned table over a run: how far its newest bound
// moved in partitions (made) and how many of its partitions went (dropped).
func TestPartitionChurnCountsMadeAndDropped(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	samples := []tableSample{
		{At: 0, Partitions: map[string]partitionSpan{"webhook_events": {Count: 15, Oldest: at, Newest: at.Add(15 * 30 * time.Second), TimeScale: 2880}}},
		{At: time.Hour, Partitions: map[string]partitionSpan{"webhook_events": {Count: 105, Oldest: at.Add(30 * time.Minute), Newest: at.Add(time.Hour + 15*30*time.Second), TimeScale: 2880}}},
	}
	got := partitionChurns(samples)
	if len(got) != 1 || got[0].Width != 30*time.Second || got[0].Made != 120 || got[0].Dropped != 30 {
		t.Fatalf("churn %+v; want 30 s partitions, 120 made, 30 dropped", got)
	}
	md := partitionSection(samples)
	if !strings.Contains(md, "| webhook_events | 30s (time scale 2880) | 15, 12:00:00, 12:07:30 | 105, 12:30:00, 13:07:30 | 120 | 30 |") {
		t.Errorf("partition section:\n%s", md)
	}
}

// A table that stops growing levels off; one that keeps growing does not.
func TestTableTrendsPlateau(t *testing.T) {
	const m = 1 << 20
	var samples []tableSample
	for i := 0; i <= 8; i++ {
		samples = append(samples, tableSample{At: time.Duration(i) * time.Minute, Tables: map[string]tableStat{
			"outbox": {Total: int64(min(i, 4)) * 10 * m, Dead: int64(100 * i)},
			"ledger": {Total: int64(i) * 10 * m, Vacuum: int64(i / 2)},
		}})
	}
	trends := tableTrends(samples)
	if len(trends) != 2 || trends[0].Name != "ledger" || trends[1].Name != "outbox" {
		t.Fatalf("trends %+v", trends)
	}
	if trends[0].Plateau || trends[0].LastQuarter != 20*m || trends[0].PerMinute != 10*m {
		t.Errorf("ledger %+v", trends[0])
	}
	if !trends[1].Plateau || len(trends[1].Total) != 5 || trends[1].Total[2] != 40*m {
		t.Errorf("outbox %+v", trends[1])
	}
	vs := vacuumSummaries(samples)
	if len(vs) != 2 || vs[0].Vacuum != 4 || vs[1].DeadMax != 800 || vs[1].DeadEnd != 800 {
		t.Errorf("vacuum %+v", vs)
	}
}

// The ledger is read from an id a little before the last read: the floor
// of a millisecond is at most any UUIDv7 made in it.
func TestUUIDv7FloorOrdersBeforeItsMillisecond(t *testing.T) {
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	ms := int64(id[0])<<40 | int64(id[1])<<32 | int64(id[2])<<24 | int64(id[3])<<16 | int64(id[4])<<8 | int64(id[5])
	floor := uuidV7Floor(time.UnixMilli(ms))
	next := uuidV7Floor(time.UnixMilli(ms + 1))
	if floor > id.String() || id.String() >= next {
		t.Fatalf("floor %s, id %s, next floor %s", floor, id, next)
	}
	c := newCreditLog(3)
	c.record(soakRefPrefix+"2", time.Second)
	c.record(soakRefPrefix+"2", 2*time.Second) // a second sighting keeps the first
	c.record("stripe:pi_evt_e2e_1", time.Second)
	c.record(soakRefPrefix+"7", time.Second) // not one of this run's
	if at, ok := c.at(2); !ok || at != time.Second || c.count != 1 {
		t.Fatalf("credit log %+v", c)
	}
}

// The report has every section, the per-window rows, and a plan change
// with the plans before and after it; the plot is well-formed SVG.
func TestSoakReportRendersEverySection(t *testing.T) {
	s := time.Second
	res := &SoakResult{
		Config: SoakConfig{Duration: 3 * time.Minute, Share: 0.7, StepDuration: 10 * s, Sample: time.Minute, TimeScale: SoakTimeScale},
		Window: 30 * s, WindowScaled: true, Bare: 1000, Sustainable: 300, Rate: 210, Sent: 37800,
		Steps:     []e2eStep{{Offered: 200, Sent: 2000, Acked: 2000, Done: 2000, P99: 100 * time.Millisecond}, {Offered: 300, Sent: 3000, Acked: 3000, Done: 3000}, {Offered: 400, Sent: 4000, Acked: 4000, Done: 3000, P99: 2 * s}},
		Retention: []retentionSetting{{Env: "OUTBOUND_LOG_RETENTION", Real: 720 * time.Hour, Soak: 15 * time.Minute, Value: "15m0s", Reader: "outbox-relay"}},
		Windows: []soakWindow{
			{Start: 0, End: 30 * s, Offered: 210, Acked: 210, Credited: 209, P50: 40 * time.Millisecond, P99: 90 * time.Millisecond,
				Usage: []procUsage{{Name: "webhook-api", Cores: 0.4, RSSMiB: 30}, {Name: "postgres", Cores: 0.8, RSSMiB: 100}}},
			{Start: 30 * s, End: 60 * s, Offered: 210, Acked: 210, Credited: 180, P50: 45 * time.Millisecond, P99: 120 * time.Millisecond,
				Usage: []procUsage{{Name: "webhook-api", Cores: 0.5, RSSMiB: 31}, {Name: "postgres", Cores: 0.9, RSSMiB: 110}}},
		},
		Samples: []tableSample{
			{At: 0, Tables: map[string]tableStat{"transaction_outbox": {Total: 5 << 20, Index: 2 << 20}, "tiny": {Total: 8192}}},
			{At: time.Minute, Tables: map[string]tableStat{"transaction_outbox": {Total: 9 << 20, Index: 3 << 20, Vacuum: 2, Dead: 500}, "tiny": {Total: 8192}}},
		},
		Plans: []planHistory{{hotStatement: hotStatement{"outbox-relay", outboxQueries, "Claim", nil}, Kind: planCustom, Samples: 3,
			Seen: []planSeen{{At: 0, Fingerprint: "aaaaaaaaaaaa", Shape: "LockRows\n  -> Index Scan using a on t\n"},
				{At: 2 * time.Minute, Fingerprint: "bbbbbbbbbbbb", Shape: "LockRows\n  -> Seq Scan on t\n"}}}},
		Profiles: []SoakProfile{
			{Window: 1, Files: []string{"bin/soak-profiles/w01-payout-worker.pprof"}, Tops: []ProfileTop{{Service: "payout-worker",
				CPU: 9 * s, Len: 30 * s, Top: []FuncShare{{"runtime.futex", 0.2}, {"encoding/json.Unmarshal", 0.1}},
				Own: []FuncShare{{"pkg/consumer.(*Consumer).run", 0.7}}}}},
			{Window: 6, Files: []string{"bin/soak-profiles/w06-payout-worker.pprof"}, Tops: []ProfileTop{{Service: "payout-worker",
				CPU: 15 * s, Len: 30 * s, Top: []FuncShare{{"runtime.futex", 0.3}}}}},
		},
		LoadStart: "1.0", LoadEnd: "2.0",
	}
	res.OK, res.Why = soakVerdict(res.Windows)
	res.Date = time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)
	doc := res.Markdown("2 cores", "make soak DURATION=3m", "soak.svg", "The machine was shared.")
	// A run saved as JSON (aegis-soak -json) renders the same report later
	// (-render).
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back SoakResult
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if again := back.Markdown("2 cores", "make soak DURATION=3m", "soak.svg", "The machine was shared."); again != doc {
		t.Errorf("the report from JSON differs:\n%s\nfrom the run's:\n%s", again, doc)
	}
	for _, want := range []string{
		"`make soak DURATION=3m` (2026-11-29)", "The machine was shared.", "**decays or fails**",
		"Sustainable: 300 /s", "**210 webhooks/s**", "400 /s not held",
		"| `OUTBOUND_LOG_RETENTION` | outbox-relay | 720h0m0s | 15m0s |",
		"Windows of 30s (the run is shorter than 6 windows of 5m0s",
		"| 0:00–0:30 | 210.0 | 210.0 | 209.0 | 40.0 ms | 90.0 ms | 0 | 0 | 1.20 |",
		"| 0:30–1:00 | 210.0 | 210.0 | 180.0 | 45.0 ms | 120.0 ms | 0 | 0 | 1.40 |",
		"![throughput, latency and table sizes per window](soak.svg)",
		"| webhook-api | 0.40 | 0.50 | 0.45 | 31 |",
		"| transaction_outbox | 5.00 (2.00) | 9.00 (3.00) | +4.00 MiB | **no**: 4.00 MiB/min |",
		"1 more tables stayed under 1 MiB",
		"| transaction_outbox | 0 | 0 | 2 | 0 | 500 | 500 | 0 |",
		"`autovacuum = off`",
		"| Claim | outbox-relay | custom | 3 | `aaaaaaaaaaaa` 0:00, `bbbbbbbbbbbb` 2:00 | 1 |",
		"### Claim (outbox-relay), custom plan: 1 plan change\n", "| 2:00 | `aaaaaaaaaaaa` | `bbbbbbbbbbbb` |",
		"`aaaaaaaaaaaa` → `bbbbbbbbbbbb` (first at 2:00",
		"in the middle of windows 1 and 6", "`bin/soak-profiles`", "**payout-worker**",
		"| 1 | 9s (0.30 cores) | `pkg/consumer.(*Consumer).run` 70 % | `runtime.futex` 20 %, `encoding/json.Unmarshal` 10 % |",
		"| 6 | 15s (0.50 cores) |  | `runtime.futex` 30 % |", "  LockRows\n-   -> Index Scan using a on t\n+   -> Seq Scan on t\n",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q:\n%s", want, doc)
		}
	}
	d := xml.NewDecoder(strings.NewReader(res.SoakPlot()))
	polylines := 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("plot not well-formed: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			polylines++
		}
	}
	// credited, offered, p99, p50, two tables and two processes' CPU.
	if polylines != 8 {
		t.Errorf("%d lines in the plot, want 8", polylines)
	}
}

// A plan change is shown as both plans in one diff; a plan that flips
// back and forth shows each distinct change once.
func TestPlanChangesShowEachDistinctChangeOnce(t *testing.T) {
	a, b := "Update\n  -> Index Scan using i on t\n  -> Result\n", "Update\n  -> Sort\n    -> Seq Scan on t\n  -> Result\n"
	if got, want := lineDiff(a, b), "  Update\n-   -> Index Scan using i on t\n+   -> Sort\n+     -> Seq Scan on t\n    -> Result\n"; got != want {
		t.Fatalf("diff:\n%s\nwant:\n%s", got, want)
	}
	h := planHistory{hotStatement: hotStatement{"outbox-relay", outboxQueries, "Claim", nil}}
	for i, fp := range []string{"a", "b", "a", "b", "a"} {
		shape := a
		if fp == "b" {
			shape = b
		}
		h.record(planSeen{At: time.Duration(i) * time.Minute, Fingerprint: fp, Shape: shape})
	}
	doc := planSection([]planHistory{h}, time.Minute)
	if n := strings.Count(doc, "```diff"); n != 2 {
		t.Errorf("%d diffs for a flip-flop (a→b, b→a), want 2:\n%s", n, doc)
	}
	if !strings.Contains(doc, "4 plan changes") || strings.Count(doc, "| `a` | `b` |") != 2 {
		t.Errorf("changes table:\n%s", doc)
	}
}
