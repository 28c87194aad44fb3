package bench

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"
)

// The plot is well-formed SVG with a point per step of each kind.
func TestE2EPlotIsSVGWithEveryStep(t *testing.T) {
	credits := []e2eStep{
		{Offered: 500, Rate: 490, P50: 20 * time.Millisecond, P99: 80 * time.Millisecond},
		{Offered: 1000, Rate: 700, P50: 900 * time.Millisecond, P99: 3 * time.Second},
	}
	payouts := []e2eStep{{Offered: 50, Rate: 49, P50: 200 * time.Millisecond, P99: 900 * time.Millisecond}}
	svg := e2ePlot(credits, payouts, 2000)
	d := xml.NewDecoder(strings.NewReader(svg))
	circles := 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("not well-formed: %v", err)
			}
			break
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "circle" {
			circles++
		}
	}
	// Delivered, p99 and p50: three points per step.
	if want := 3 * (len(credits) + len(payouts)); circles != want {
		t.Fatalf("%d points, want %d", circles, want)
	}
	if !strings.Contains(svg, "goal 0.5× pgbench = 1000/s") {
		t.Fatal("no goal line at half the bare pgbench rate")
	}
}

func TestStepRatesRoundAndRise(t *testing.T) {
	got := stepRates(1234, []float64{0.01, 0.011, 0.5, 1})
	want := []float64{10, 620, 1230}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}
