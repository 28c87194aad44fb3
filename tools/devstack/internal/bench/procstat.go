package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports (the kernel exports no other
// value to user space without sysconf, which needs cgo).
const clockTicks = 100

// procUsage is what one process (or a group, Postgres's backends) used over
// a measured interval.
type procUsage struct {
	Name string
	// Cores is CPU time over wall time: 1.0 is one core busy all along.
	Cores float64
	// RSS in MiB at the end of the interval (see readRSS).
	RSSMiB float64
}

// cpuTicks reads utime+stime of pid (all its threads) from /proc/<pid>/stat.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after its closing
	// parenthesis are fixed: state is field 3, utime 14 and stime 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	u, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, err
	}
	st, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, err
	}
	return u + st, nil
}

// readRSS reads a memory figure of pid from /proc/<pid>/status, in KiB:
// VmRSS, or RssAnon when private is set (Postgres backends share
// shared_buffers; summing their VmRSS would count it once per backend).
func readRSS(pid int, private bool) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	key := "VmRSS:"
	if private {
		key = "RssAnon:"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, key) {
			var kb int64
			_, _ = fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, key)), "%d", &kb)
			return kb
		}
	}
	return 0
}

// pidsByComm lists the processes whose command name is comm (e.g. the
// shared redis-server).
func pidsByComm(comm string) []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	var pids []int
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || strings.TrimSpace(string(b)) != comm {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(d))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// backendPids lists the Postgres backends connected to database name.
func backendPids(ctx context.Context, pool *pgxpool.Pool, name string) ([]int, error) {
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, name)
	if err != nil {
		return nil, fmt.Errorf("list backends: %w", err)
	}
	defer rows.Close()
	var pids []int
	for rows.Next() {
		var pid int32
		if err := rows.Scan(&pid); err != nil {
			return nil, err
		}
		pids = append(pids, int(pid))
	}
	return pids, rows.Err()
}

// watched is one process or group of processes whose usage is reported.
type watched struct {
	name    string
	pids    []int
	private bool // RssAnon (see readRSS)
	// start is each process's CPU ticks at begin (those it could read).
	start map[int]int64
}

// usageMeter measures CPU and memory of the watched processes over an
// interval: begin, then end.
type usageMeter struct {
	procs []*watched
	t0    time.Time
}

func (m *usageMeter) watch(name string, private bool, pids ...int) {
	m.procs = append(m.procs, &watched{name: name, pids: pids, private: private})
}

func (m *usageMeter) begin() {
	m.t0 = time.Now()
	for _, p := range m.procs {
		p.start = map[int]int64{}
		for _, pid := range p.pids {
			if t, err := cpuTicks(pid); err == nil { // a process gone is counted as nothing
				p.start[pid] = t
			}
		}
	}
}

func (m *usageMeter) end() []procUsage {
	wall := time.Since(m.t0).Seconds()
	out := make([]procUsage, 0, len(m.procs))
	for _, p := range m.procs {
		// Each process's own ticks since begin: one that exited meanwhile
		// (a database backend whose connection closed) loses its share of
		// the window, rather than taking its whole life off the others'.
		var ticks, rss int64
		for _, pid := range p.pids {
			t0, ok := p.start[pid]
			t, err := cpuTicks(pid)
			if ok && err == nil && t >= t0 {
				ticks += t - t0
			}
			rss += readRSS(pid, p.private)
		}
		out = append(out, procUsage{Name: p.name, Cores: float64(ticks) / clockTicks / wall, RSSMiB: float64(rss) / 1024})
	}
	return out
}

// usageString renders usages as "name 0.42 cores 35 MiB, …".
func usageString(us []procUsage) string {
	parts := make([]string, len(us))
	var total float64
	for i, u := range us {
		parts[i] = fmt.Sprintf("%s %.2f cores %.0f MiB", u.Name, u.Cores, u.RSSMiB)
		total += u.Cores
	}
	return fmt.Sprintf("%s (sum %.2f of %d cores)", strings.Join(parts, ", "), total, runtime.NumCPU())
}
