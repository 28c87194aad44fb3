package chaos

import (
	"strings"
	"testing"
	"time"
)

func TestReliabilityMarksRestartsAndMissingProcesses(t *testing.T) {
	api := func(rss float64, g int) ServiceSample {
		return ServiceSample{Name: "webhook-api", RSSMiB: rss, Goroutines: g, Started: 100}
	}
	worker := func(started float64) ServiceSample {
		return ServiceSample{Name: "payout-worker", RSSMiB: 20, Goroutines: 21, Started: started}
	}
	r := &Report{Seed: 7, Profile: "soak", Duration: time.Minute, Rate: 40, FaultEvery: 30 * time.Second,
		StartFootprint: []ServiceSample{api(15, 14), worker(100)},
		Lag: []LagSample{
			{At: 30 * time.Second, Unpublished: 3, OldestAgeS: 1.5, AckedPerSec: 25, Footprint: []ServiceSample{api(22, 17)}},
			{At: time.Minute, Footprint: []ServiceSample{api(23, 17), worker(160)}},
		},
		DrainedFootprint: []ServiceSample{api(23, 14), worker(160)},
	}
	doc := r.Reliability("a machine", "make chaos PROFILE=soak DURATION=1m")
	for _, want := range []string{
		"Seed 7: 1m0s of workload at 40 ops/s with a fault every 30s",
		"| at | payout-worker | webhook-api |",
		"| before | 20.0 / 21 | 15.0 / 14 |",
		"| 30s | down | 22.0 / 17 |",
		"| 1m0s | 20.0 / 21 * | 23.0 / 17 |", // restarted while it was down
		"| drained | 20.0 / 21 | 23.0 / 14 |",
		"| 30s | 3 | 1.5 | 25.0 |",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q:\n%s", want, doc)
		}
	}
}
