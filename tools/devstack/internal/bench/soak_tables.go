package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// tableStat is one table's footprint and vacuum counters at a sample: a
// partitioned table's summed over its partitions.
type tableStat struct {
	// Total is pg_total_relation_size (heap, TOAST, indexes), Index
	// pg_indexes_size, in bytes.
	Total, Index int64
	// From pg_stat_user_tables: vacuums and analyzes run by autovacuum
	// and by hand (here: the soak's stand-in for autovacuum), live and
	// dead tuples.
	AutoVacuum, AutoAnalyze, Vacuum, Analyze int64
	Live, Dead                               int64
}

// tableSample is every table of the soak's database at one moment (At,
// from the soak's start), and the partitions of each table kept by time
// partition.
type tableSample struct {
	At         time.Duration
	Tables     map[string]tableStat
	Partitions map[string]partitionSpan
}

// partitionSpan is a table of partition_policies at a sample: how many
// partitions it has, the lower bound of its oldest (zero: MINVALUE) and the
// upper bound of its newest, and its policy's time scale.
type partitionSpan struct {
	Count     int64
	Oldest    time.Time
	Newest    time.Time
	TimeScale int64
}

// sqlPartitionSpans reads every partition_policies table's partitions
// (migrations 000044 and 000051: partition_bounds is the catalog's view of
// them). A table not partitioned has no line.
const sqlPartitionSpans = `
SELECT p.table_name, count(b.part)::bigint, coalesce(min(b.lo), 'epoch'::timestamptz), max(b.hi), p.time_scale::bigint
FROM partition_policies p
JOIN pg_class c ON c.oid = p.table_name::regclass AND c.relkind = 'p'
JOIN LATERAL partition_bounds(p.table_name::regclass) b ON true
GROUP BY p.table_name, p.time_scale
ORDER BY 1`

// sqlTableStats reads every ordinary and partitioned table of the public
// schema, each partition counted in its root (pg_partition_root: a
// partitioned table's figures are its partitions', however many the
// partition maintenance has made; a plain table is its own root). A
// partitioned parent has no storage or statistics of its own: it adds
// zeros.
const sqlTableStats = `
SELECT coalesce(pg_partition_root(c.oid), c.oid)::regclass::text AS tbl,
       sum(pg_total_relation_size(c.oid))::bigint,
       sum(pg_indexes_size(c.oid))::bigint,
       coalesce(sum(s.autovacuum_count), 0)::bigint, coalesce(sum(s.autoanalyze_count), 0)::bigint,
       coalesce(sum(s.vacuum_count), 0)::bigint, coalesce(sum(s.analyze_count), 0)::bigint,
       coalesce(sum(s.n_live_tup), 0)::bigint, coalesce(sum(s.n_dead_tup), 0)::bigint
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')
GROUP BY 1
ORDER BY 1`

// sampleTables reads sqlTableStats.
func sampleTables(ctx context.Context, pool *pgxpool.Pool, at time.Duration) (tableSample, error) {
	rows, err := pool.Query(ctx, sqlTableStats)
	if err != nil {
		return tableSample{}, fmt.Errorf("read table sizes: %w", err)
	}
	defer rows.Close()
	s := tableSample{At: at, Tables: map[string]tableStat{}}
	for rows.Next() {
		var name string
		var t tableStat
		if err := rows.Scan(&name, &t.Total, &t.Index, &t.AutoVacuum, &t.AutoAnalyze, &t.Vacuum, &t.Analyze, &t.Live, &t.Dead); err != nil {
			return tableSample{}, fmt.Errorf("read table sizes: %w", err)
		}
		s.Tables[name] = t
	}
	if err := rows.Err(); err != nil {
		return tableSample{}, fmt.Errorf("read table sizes: %w", err)
	}
	rows.Close()
	rows, err = pool.Query(ctx, sqlPartitionSpans)
	if err != nil {
		return tableSample{}, fmt.Errorf("read partitions: %w", err)
	}
	defer rows.Close()
	s.Partitions = map[string]partitionSpan{}
	for rows.Next() {
		var name string
		var p partitionSpan
		if err := rows.Scan(&name, &p.Count, &p.Oldest, &p.Newest, &p.TimeScale); err != nil {
			return tableSample{}, fmt.Errorf("read partitions: %w", err)
		}
		s.Partitions[name] = p
	}
	return s, rows.Err()
}

// partitionChurn is what a run did to one table's partitions: made and
// dropped, from its first sample to its last (each partition spans a day /
// TimeScale; made is how far the newest bound moved, in partitions).
type partitionChurn struct {
	Name          string
	First, Last   partitionSpan
	Made, Dropped int64
	Width         time.Duration
}

// partitionChurns lists the churn of every table partitioned at the first
// and the last sample, in name order.
func partitionChurns(samples []tableSample) []partitionChurn {
	if len(samples) == 0 {
		return nil
	}
	first, last := samples[0].Partitions, samples[len(samples)-1].Partitions
	var out []partitionChurn
	for _, n := range slices.Sorted(maps.Keys(last)) {
		a, ok := first[n]
		if !ok {
			continue
		}
		b := last[n]
		c := partitionChurn{Name: n, First: a, Last: b, Width: 24 * time.Hour / time.Duration(max(1, b.TimeScale))}
		c.Made = int64(b.Newest.Sub(a.Newest) / c.Width)
		c.Dropped = a.Count + c.Made - b.Count
		out = append(out, c)
	}
	return out
}

// plateauShare: a table has reached its plateau when it grew by less than
// this share of its final size over the last quarter of the run (or by
// less than plateauBytes: small tables' pages come one at a time).
const (
	plateauShare = 0.05
	plateauBytes = 1 << 20
)

// tableTrend is one table's sizes over a run and whether they level off.
type tableTrend struct {
	Name string
	// Sizes at the samples picked for the report (trendPoints).
	Total, Index []int64
	// LastQuarter is the growth over the run's last quarter, in bytes;
	// PerMinute the same per minute.
	LastQuarter int64
	PerMinute   float64
	Plateau     bool
}

// trendPoints picks the samples the size table shows: the first, the
// last, and the ones nearest a quarter, half and three quarters through.
func trendPoints(samples []tableSample) []int {
	if len(samples) == 0 {
		return nil
	}
	end := samples[len(samples)-1].At
	var idx []int
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		want := time.Duration(f * float64(end))
		best := 0
		for i, s := range samples {
			if absDur(s.At-want) < absDur(samples[best].At-want) {
				best = i
			}
		}
		if len(idx) == 0 || idx[len(idx)-1] != best {
			idx = append(idx, best)
		}
	}
	return idx
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// tableTrends turns the samples into one trend per table, in name order
// (a table missing from a sample counts as 0 bytes there).
func tableTrends(samples []tableSample) []tableTrend {
	if len(samples) == 0 {
		return nil
	}
	points := trendPoints(samples)
	last := samples[len(samples)-1]
	// The sample nearest three quarters through: the last quarter's start.
	q := points[0]
	for i, s := range samples {
		if s.At <= last.At*3/4 {
			q = i
		}
	}
	names := map[string]bool{}
	for _, s := range samples {
		for n := range s.Tables {
			names[n] = true
		}
	}
	var out []tableTrend
	for _, n := range sortedKeys(names) {
		t := tableTrend{Name: n}
		for _, i := range points {
			t.Total = append(t.Total, samples[i].Tables[n].Total)
			t.Index = append(t.Index, samples[i].Tables[n].Index)
		}
		t.LastQuarter = last.Tables[n].Total - samples[q].Tables[n].Total
		if mins := (last.At - samples[q].At).Minutes(); mins > 0 {
			t.PerMinute = float64(t.LastQuarter) / mins
		}
		t.Plateau = t.LastQuarter < plateauBytes || float64(t.LastQuarter) < plateauShare*float64(last.Tables[n].Total)
		out = append(out, t)
	}
	return out
}

// vacuumSummary is one table's vacuum and analyze activity over a run:
// the counters' growth from the first sample to the last, and its dead
// tuples at the end and at their highest sample.
type vacuumSummary struct {
	Name                                     string
	AutoVacuum, AutoAnalyze, Vacuum, Analyze int64
	DeadEnd, DeadMax, LiveEnd                int64
}

// vacuumSummaries lists the tables with any vacuum, analyze or dead tuple
// over the run, in name order.
func vacuumSummaries(samples []tableSample) []vacuumSummary {
	if len(samples) == 0 {
		return nil
	}
	first, last := samples[0], samples[len(samples)-1]
	names := map[string]bool{}
	for n := range last.Tables {
		names[n] = true
	}
	var out []vacuumSummary
	for _, n := range sortedKeys(names) {
		a, b := first.Tables[n], last.Tables[n]
		v := vacuumSummary{Name: n, AutoVacuum: b.AutoVacuum - a.AutoVacuum, AutoAnalyze: b.AutoAnalyze - a.AutoAnalyze,
			Vacuum: b.Vacuum - a.Vacuum, Analyze: b.Analyze - a.Analyze, DeadEnd: b.Dead, LiveEnd: b.Live}
		for _, s := range samples {
			v.DeadMax = max(v.DeadMax, s.Tables[n].Dead)
		}
		if v.AutoVacuum+v.AutoAnalyze+v.Vacuum+v.Analyze+v.DeadMax > 0 {
			out = append(out, v)
		}
	}
	return out
}

// sortedKeys is m's keys in order.
func sortedKeys(m map[string]bool) []string {
	return slices.Sorted(maps.Keys(m))
}
