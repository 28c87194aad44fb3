package chaos

import (
	"fmt"
	"time"
)

// Profile sizes a run.
type Profile struct {
	Name string
	// Duration of the workload and fault phase.
	Duration time.Duration
	// Rate is workload operations per second.
	Rate int
	// Users is how many wallets the workload spreads over.
	Users int
	// FaultEvery is the pause between faults; 0 injects none.
	FaultEvery time.Duration
	// KafkaOutage is the range of a Kafka outage.
	KafkaOutageMin, KafkaOutageMax time.Duration
	// DrainTimeout bounds each drain.
	DrainTimeout time.Duration
	// SampleEvery is how often lag and throughput are recorded.
	SampleEvery time.Duration
	// TimeScale compresses time: every duration in ScaledVars is divided
	// by it (timescale.go). 0 or 1: real time, the services' chaos values.
	TimeScale float64
	// Faults is the fault cycle; nil: allFaults.
	Faults []string
}

// Profiles by name.
func ProfileNamed(name string) (Profile, error) {
	switch name {
	case "short": // inside make test
		return Profile{Name: name, Duration: 60 * time.Second, Rate: 30, Users: 24, FaultEvery: 3 * time.Second,
			KafkaOutageMin: 4 * time.Second, KafkaOutageMax: 6 * time.Second, DrainTimeout: 3 * time.Minute,
			SampleEvery: 10 * time.Second}, nil
	case "full": // make chaos
		// 4 minutes: one cycle of every fault kind, the crash loops
		// included (each waits up to 35 s for its group to settle).
		return Profile{Name: name, Duration: 4 * time.Minute, Rate: 40, Users: 40, FaultEvery: 8 * time.Second,
			KafkaOutageMin: 10 * time.Second, KafkaOutageMax: 30 * time.Second, DrainTimeout: 4 * time.Minute,
			SampleEvery: 15 * time.Second}, nil
	case "soak": // make chaos PROFILE=soak: a long run at a moderate fault rate
		return Profile{Name: name, Duration: 10 * time.Minute, Rate: 40, Users: 60, FaultEvery: 30 * time.Second,
			KafkaOutageMin: 5 * time.Second, KafkaOutageMax: 10 * time.Second, DrainTimeout: 5 * time.Minute,
			SampleEvery: 30 * time.Second}, nil
	case "week": // make chaos PROFILE=week: seven simulated days
		// Seven simulated days of workload at WeekScale (3.5 minutes),
		// a fault every four simulated hours, the long ones spanning
		// simulated hours to a day (weekFaults).
		p := Profile{Name: name, Rate: 15, Users: 40, KafkaOutageMin: 5 * time.Second, KafkaOutageMax: 10 * time.Second,
			DrainTimeout: 4 * time.Minute, SampleEvery: 10 * time.Second, TimeScale: WeekScale, Faults: weekFaults()}
		p.Duration = p.Sim(7 * simDay)
		p.FaultEvery = p.Sim(4 * time.Hour)
		return p, nil
	}
	return Profile{}, fmt.Errorf("unknown chaos profile %q (short, full, soak, week)", name)
}
