package bench

import (
	"fmt"
	"math"
	"strings"
)

// The e2e plot, drawn as SVG by hand: two panels over offered load,
// delivered throughput (with the line where delivered equals offered) and
// p50/p99 latency on a log scale (with the 1 s bound).

type series struct {
	name, color string
	dashed      bool
	xs, ys      []float64
}

type panel struct {
	title, xLabel, yLabel string
	xMax, yMin, yMax      float64
	logY                  bool
	series                []series
	// guides are straight reference lines, from (x1,y1) to (x2,y2) in data
	// units, with a label at the end.
	guides []guide
}

type guide struct {
	x1, y1, x2, y2 float64
	label, color   string
}

const (
	plotW, plotH   = 980, 800
	panelW, panelH = 400, 280
	marginL, top   = 70, 60
	rowH           = 370
)

// e2ePlot draws one row of two panels per kind (credits, payouts):
// delivered vs offered, and latency p50/p99; bare is the bare pgbench rate
// (the credits' goal is half of it).
func e2ePlot(credits, payouts []e2eStep, bare float64) string {
	const blue, orange = "#1f77b4", "#ff7f0e"
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">Aegis end to end on one box, offered load stepped up (bare two-table pgbench: %.0f tx/s)</text>`+"\n", marginL, bare)
	rows := []struct {
		name, color string
		steps       []e2eStep
		goal        float64
	}{
		{"Credits: signed payment webhook → ledger credit", blue, credits, 0.5},
		{"Payouts: POST /v1/payouts → AWAITING_RESPONSE at the PSP", orange, payouts, 0},
	}
	for i, row := range rows {
		thr, lat := stepPanels(row.name, row.color, row.steps, bare, row.goal)
		thr.draw(&b, marginL, top+i*rowH)
		lat.draw(&b, marginL+panelW+100, top+i*rowH)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// stepPanels builds the two panels of one kind of load.
func stepPanels(name, color string, steps []e2eStep, bare, goal float64) (panel, panel) {
	const red, grey = "#d62728", "#888"
	xMax, yMax, yLat := 0.0, 0.0, 1000.0
	var xs, rates, p50s, p99s []float64
	for _, s := range steps {
		xs = append(xs, s.Offered)
		rates = append(rates, s.Rate)
		p50s = append(p50s, math.Max(float64(s.P50.Microseconds())/1000, 1))
		p99s = append(p99s, math.Max(float64(s.P99.Microseconds())/1000, 1))
		xMax = math.Max(xMax, s.Offered)
		yMax = math.Max(yMax, s.Rate)
		yLat = math.Max(yLat, p99s[len(p99s)-1])
	}
	if goal > 0 {
		xMax = math.Max(xMax, bare*goal)
	}
	xMax = niceCeil(math.Max(xMax, 10) * 1.05)
	yMax = niceCeil(math.Max(yMax, xMax))
	thr := panel{title: name, xLabel: "offered /s", yLabel: "delivered /s (done ÷ time to the last)", xMax: xMax, yMax: yMax,
		series: []series{{name: "delivered", color: color, xs: xs, ys: rates}},
		guides: []guide{{0, 0, xMax, xMax, "delivered = offered", grey}}}
	lat := panel{title: "latency, request scheduled → done", xLabel: "offered /s", yLabel: "ms (log)", xMax: xMax,
		yMin: 1, yMax: math.Pow(10, math.Ceil(math.Log10(yLat*1.5))), logY: true,
		series: []series{{name: "p99", color: color, xs: xs, ys: p99s}, {name: "p50", color: color, dashed: true, xs: xs, ys: p50s}},
		guides: []guide{{0, 1000, xMax, 1000, "1 s bound", red}}}
	if goal > 0 && bare > 0 {
		x := bare * goal
		thr.guides = append(thr.guides, guide{x, 0, x, yMax, fmt.Sprintf("goal %.1f× pgbench = %.0f/s", goal, x), red})
		lat.guides = append(lat.guides, guide{x, lat.yMin, x, lat.yMax, "goal", red})
	}
	return thr, lat
}

func (p panel) x(v float64) float64 { return v / p.xMax * panelW }

func (p panel) y(v float64) float64 {
	if p.logY {
		v = math.Max(v, p.yMin)
		return panelH - (math.Log10(v)-math.Log10(p.yMin))/(math.Log10(p.yMax)-math.Log10(p.yMin))*panelH
	}
	return panelH - (v-p.yMin)/(p.yMax-p.yMin)*panelH
}

func (p panel) draw(b *strings.Builder, ox, oy int) {
	fmt.Fprintf(b, `<g transform="translate(%d,%d)">`+"\n", ox, oy)
	fmt.Fprintf(b, `<text x="0" y="-10" font-weight="bold">%s</text>`+"\n", p.title)
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="none" stroke="#333"/>`+"\n", panelW, panelH)
	// Axes' ticks and grid.
	for _, t := range ticks(0, p.xMax) {
		x := p.x(t)
		fmt.Fprintf(b, `<line x1="%.1f" y1="0" x2="%.1f" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n",
			x, x, panelH, x, panelH+16, fmtTick(t))
	}
	var yt []float64
	if p.logY {
		for v := p.yMin; v <= p.yMax*1.001; v *= 10 {
			yt = append(yt, v)
		}
	} else {
		yt = ticks(p.yMin, p.yMax)
	}
	for _, t := range yt {
		y := p.y(t)
		fmt.Fprintf(b, `<line x1="0" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/><text x="-6" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>`+"\n",
			y, panelW, y, y, fmtTick(t))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">%s</text>`+"\n", panelW/2, panelH+34, p.xLabel)
	fmt.Fprintf(b, `<text transform="translate(-52,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", panelH/2, p.yLabel)
	for _, g := range p.guides {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="2,3"/>`+"\n",
			p.x(g.x1), p.y(g.y1), p.x(g.x2), p.y(g.y2), g.color)
		switch {
		case g.label == "":
		case g.x1 == g.x2: // vertical: label right of it, at the bottom
			fmt.Fprintf(b, `<text x="%.1f" y="%d" fill="%s" font-size="11">%s</text>`+"\n", p.x(g.x1)+4, panelH-6, g.color, g.label)
		default:
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" fill="%s" font-size="11" text-anchor="end">%s</text>`+"\n",
				math.Min(p.x(g.x2), panelW)-4, math.Max(p.y(g.y2), 0)+12, g.color, g.label)
		}
	}
	for i, s := range p.series {
		var pts []string
		for j := range s.xs {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", p.x(s.xs[j]), p.y(s.ys[j])))
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6,4"`
		}
		if len(pts) > 0 {
			fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", s.color, dash, strings.Join(pts, " "))
			for _, pt := range pts {
				xy := strings.Split(pt, ",")
				fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", xy[0], xy[1], s.color)
			}
		}
		// Legend, top left inside the panel.
		ly := 14 + 16*i
		fmt.Fprintf(b, `<line x1="8" y1="%d" x2="30" y2="%d" stroke="%s" stroke-width="2"%s/><text x="36" y="%d" dominant-baseline="middle">%s</text>`+"\n",
			ly, ly, s.color, dash, ly, s.name)
	}
	b.WriteString("</g>\n")
}

// ticks returns about five round values from lo to hi.
func ticks(lo, hi float64) []float64 {
	if hi <= lo {
		return []float64{lo}
	}
	step := niceCeil((hi - lo) / 5)
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi*1.0001; v += step {
		out = append(out, v)
	}
	return out
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*e {
			return m * e
		}
	}
	return 10 * e
}

func fmtTick(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 1000 && math.Mod(v, 1000) == 0:
		return fmt.Sprintf("%.0fk", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.1fk", v/1000)
	case v < 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.0f", v)
}
