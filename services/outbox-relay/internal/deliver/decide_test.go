package deliver

import (
	"errors"
	"testing"
	"time"
)

// The answer decides the delivery's next state, and a Retry-After never
// parks a delivery past the schedule's longest step.
func TestDecide(t *testing.T) {
	t.Parallel()
	d := &Deliverer{cfg: Config{Schedule: []time.Duration{time.Second, time.Minute, time.Hour}}}
	cases := []struct {
		name    string
		a       answer
		n       int
		state   string
		minWait time.Duration
		maxWait time.Duration
	}{
		{"2xx", answer{status: 204}, 1, "succeeded", 0, 0},
		{"410", answer{status: 410}, 1, "failed", 0, 0},
		{"400", answer{status: 400}, 1, "failed", 0, 0},
		{"408", answer{status: 408}, 1, "pending", 900 * time.Millisecond, 1100 * time.Millisecond},
		{"409", answer{status: 409}, 2, "pending", 54 * time.Second, 66 * time.Second},
		{"503 last", answer{status: 503}, 4, "failed", 0, 0},
		{"network", answer{err: errors.New("refused")}, 3, "pending", 54 * time.Minute, 66 * time.Minute},
		{"302", answer{status: 302}, 1, "pending", 900 * time.Millisecond, 1100 * time.Millisecond},
		{"429 later", answer{status: 429, retryAfter: 10 * time.Minute}, 1, "pending", 10 * time.Minute, 10 * time.Minute},
		{"429 too late", answer{status: 429, retryAfter: 7 * 24 * time.Hour}, 1, "pending", time.Hour, time.Hour},
	}
	for _, c := range cases {
		v := d.decide(c.a, c.n)
		if v.state != c.state || v.delay < c.minWait || v.delay > c.maxWait {
			t.Errorf("%s: %s after %s, want %s after %s..%s", c.name, v.state, v.delay, c.state, c.minWait, c.maxWait)
		}
		if v.gone != (c.name == "410") {
			t.Errorf("%s: gone = %v", c.name, v.gone)
		}
	}
}
