package adapt

import (
	"encoding/json"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// The real H200 capture (llama-server d32676d, width 6: five positions).
func TestParseMetricsRealCapture(t *testing.T) {
	f, err := os.Open("../../engine/testdata/h200/metrics-after.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ParseMetrics(f)
	if err != nil {
		t.Fatal(err)
	}
	want := Snapshot{Cycles: 28, Drafted: 128, Accepted: 32, PerPos: []float64{24, 8, 0, 0, 0}, HasSpec: true, HasPerPos: true,
		Predicted: 64, PredictSeconds: 0.164, Decodes: 32, Processing: 0}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("got %+v\nwant %+v", s, want)
	}
}

func TestParseMetricsErrors(t *testing.T) {
	for name, body := range map[string]string{
		"bad value":     "llamacpp:spec_decode_num_drafts_total abc\n",
		"bad position":  `llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="x"} 3` + "\n",
		"huge position": `llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="100000"} 3` + "\n",
	} {
		if _, err := ParseMetrics(strings.NewReader(body)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// Other families and comments are skipped, whatever they hold.
	s, err := ParseMetrics(strings.NewReader("# HELP x\nother_family{a=\"b\"} NaNx\nllamacpp:requests_processing 3\n"))
	if err != nil || s.Processing != 3 || s.HasSpec {
		t.Errorf("got %+v, %v", s, err)
	}
}

func TestSince(t *testing.T) {
	a := Snapshot{Cycles: 10, Drafted: 30, Accepted: 12, PerPos: []float64{8, 4}, Predicted: 30, PredictSeconds: 0.1}
	b := Snapshot{Cycles: 25, Drafted: 75, Accepted: 30, PerPos: []float64{20, 9, 1}, Predicted: 70, PredictSeconds: 0.3, Processing: 2}
	d, ok := b.Since(a)
	if !ok || d.Cycles != 15 || !reflect.DeepEqual(d.PerPos, []float64{12, 5, 1}) || d.Processing != 2 || !near(d.PredictSeconds, 0.2, 1e-12) {
		t.Errorf("delta %+v ok %v", d, ok)
	}
	for name, c := range map[string]Snapshot{
		"restart":          {Cycles: 3, PerPos: []float64{1}},
		"position dropped": {Cycles: 30, Drafted: 80, Accepted: 30, PerPos: []float64{20}, Predicted: 80, PredictSeconds: 1},
		"position fell":    {Cycles: 30, Drafted: 80, Accepted: 30, PerPos: []float64{7, 4}, Predicted: 80, PredictSeconds: 1},
	} {
		if _, ok := c.Since(a); ok {
			t.Errorf("%s: accepted as a delta", name)
		}
	}
}

// Positions past the running width are dropped: llama-server keeps the
// family sized to the widest width it has run.
func TestCountsAdd(t *testing.T) {
	var c Counts
	c.Add(Delta{Cycles: 10, PerPos: []float64{6, 3, 1, 0}}, 3)
	c.Add(Delta{Cycles: 0, PerPos: []float64{99}}, 3) // no cycles: nothing
	c.Add(Delta{Cycles: 10, PerPos: []float64{4, 1}}, 3)
	if c.Cycles != 20 || !reflect.DeepEqual(c.AtLeast, []float64{10, 4}) {
		t.Errorf("%+v", c)
	}
	a := c.Obs()
	if a.S(1) != 0.5 || a.S(2) != 0.2 || a.S(3) != 0 {
		t.Errorf("S %v %v %v", a.S(1), a.S(2), a.S(3))
	}
	if tpc, ok := a.TokensPerCycle(3); !ok || !near(tpc, 1.7, 1e-12) {
		t.Errorf("tokens per cycle(3) = %v %v", tpc, ok)
	}
	if _, ok := a.TokensPerCycle(4); ok {
		t.Error("tokens per cycle past the observed positions")
	}
}

func TestWilson(t *testing.T) {
	for _, c := range []struct{ x, n, lo, hi float64 }{
		{8, 10, 0.490157, 0.943319}, // hand-computed: centre (p + z²/2n)/(1 + z²/n)
		{0, 10, 0, 0.277540},
		{500, 1000, 0.469069, 0.530931},
		{3, 0, 0, 1},
	} {
		lo, hi := Wilson(c.x, c.n, 1.96)
		if !near(lo, c.lo, 1e-6) || !near(hi, c.hi, 1e-6) {
			t.Errorf("Wilson(%v, %v) = %v, %v; want %v, %v", c.x, c.n, lo, hi, c.lo, c.hi)
		}
	}
}

func TestDrift(t *testing.T) {
	obs := func(n float64, s ...float64) Acceptance {
		a := make(Acceptance, len(s))
		for i, v := range s {
			a[i] = Obs{Count: v * n, Cycles: n}
		}
		return a
	}
	base := obs(1000, 0.9, 0.9, 0.9)
	if k := Drift(base, obs(300, 0.88, 0.91, 0.9), 4, nil); k != 0 {
		t.Errorf("noise called drift at %d", k)
	}
	// Position 3 falls from 0.9 to 0.5: z ≈ 16.
	if k := Drift(base, obs(300, 0.9, 0.9, 0.5), 4, nil); k != 3 {
		t.Errorf("drift at %d, want 3", k)
	}
	if k := Drift(base, obs(300, 0.9), 4, nil); k != 0 { // fewer positions: compare the common ones
		t.Errorf("drift at %d", k)
	}
}

// The H200 probe curves (llama-server d32676d) put W0 at 8, before the
// 8 → 9 kernel boundary; a curve without a jump gives the widest width it
// covers.
func TestExplorationWidth(t *testing.T) {
	q8 := Curve{VerifyMS: map[int]float64{1: 3.20, 2: 3.33, 3: 3.90, 4: 4.14, 5: 4.34, 6: 4.58, 7: 4.81, 8: 5.09, 9: 5.97, 10: 6.08, 11: 6.19}}
	q4 := Curve{VerifyMS: map[int]float64{1: 2.62, 2: 2.81, 3: 3.18, 4: 3.48, 5: 3.73, 6: 4.10, 7: 4.38, 8: 4.75, 9: 5.80, 10: 5.90}}
	smooth := Curve{VerifyMS: map[int]float64{1: 1, 2: 1.1, 3: 1.2, 4: 1.3, 5: 1.4, 6: 1.5}}
	if w := q8.ExplorationWidth(17); w != 8 {
		t.Errorf("Q8_0: W0 %d, want 8", w)
	}
	if w := q4.ExplorationWidth(17); w != 8 {
		t.Errorf("Q4_0: W0 %d, want 8", w)
	}
	if w := q8.ExplorationWidth(6); w != 6 {
		t.Errorf("capped: W0 %d, want 6", w)
	}
	if w := smooth.ExplorationWidth(17); w != 6 {
		t.Errorf("no jump: W0 %d, want 6, the widest the curve covers", w)
	}
	if w := (Curve{VerifyMS: map[int]float64{1: 1, 4: 2, 16: 3}}).ExplorationWidth(17); w != 16 {
		t.Errorf("sparse curve: W0 %d, want 16", w)
	}
	if w := (Curve{VerifyMS: map[int]float64{1: 1}}).ExplorationWidth(17); w != 0 {
		t.Errorf("one row: W0 %d, want 0", w)
	}
}

func TestCurveAt(t *testing.T) {
	c := Curve{VerifyMS: map[int]float64{1: 2, 4: 5, 8: 6}}
	for _, tc := range []struct {
		rows int
		ms   float64
		ok   bool
	}{{1, 2, true}, {2, 3, true}, {6, 5.5, true}, {8, 6, true}, {9, 0, false}, {0, 0, false}} {
		ms, ok := c.At(tc.rows)
		if ok != tc.ok || !near(ms, tc.ms, 1e-12) {
			t.Errorf("At(%d) = %v %v, want %v %v", tc.rows, ms, ok, tc.ms, tc.ok)
		}
	}
}

// Drafting is a fixed part per cycle plus a part per drafted token, fitted
// to every width measured; a width measured uses its own cycle.
func TestCycleCost(t *testing.T) {
	c := Curve{VerifyMS: map[int]float64{1: 2, 2: 2, 3: 2, 4: 2, 8: 3, 9: 4, 16: 5, 17: 5}}
	// The demo's shape: 6.9 ms fixed + 0.24 ms per drafted token.
	demo := func(w int) float64 { v, _ := c.At(w); return v + 6.9 + 0.24*float64(w-1) }
	for _, tc := range []struct {
		name string
		m    map[int]Measure
		w, n int
		ms   float64
		from string
	}{
		{"classic", nil, 1, 1, 2, "probe"},
		// Classic served at this concurrency: its live steps, not the
		// idle probe; at another concurrency the probe again.
		{"classic measured", map[int]Measure{1: {MS: 2.3, N: 1}}, 1, 1, 2.3, "measured"},
		{"classic measured at another concurrency", map[int]Measure{1: {MS: 2.3, N: 4}}, 1, 1, 2, "probe"},
		// Classic's measured cost is no drafting cost to fit.
		{"classic not in the fit", map[int]Measure{1: {MS: 9, N: 1}, 4: {MS: 4, N: 1}}, 2, 1, 2 + 1 + 1.0/3, "probe+draft@4"},
		{"measured wins", map[int]Measure{4: {MS: 4, N: 1}}, 4, 1, 4, "measured"},
		// A model through the origin from width 17 would give 2 + 0.24 +
		// 6.9/16 = 2.67 ms: 90% of the real cycle missing.
		{"fixed part from two widths", map[int]Measure{4: {MS: demo(4), N: 1}, 17: {MS: demo(17), N: 1}}, 2, 1, demo(2), "probe+draft fit(4,17)"},
		{"fixed part, between", map[int]Measure{2: {MS: demo(2), N: 1}, 17: {MS: demo(17), N: 1}}, 8, 1, demo(8), "probe+draft fit(2,17)"},
		// One width: half of its drafting fixed, half per token.
		{"one width: the middle", map[int]Measure{9: {MS: 8, N: 1}}, 5, 1, 2.25 + 2 + 4*4.0/16, "probe+draft@9"},
		// A per-token part that comes out negative is no part at all: the
		// mean of 3 and 2.5 ms, weighted by 1/(2% of the cycle)².
		{"negative per token", map[int]Measure{3: {MS: 5, N: 1}, 8: {MS: 5.5, N: 1}}, 4, 1, 2 + (3/25.0+2.5/30.25)/(1/25.0+1/30.25), "probe+draft fit(3,8)"},
		{"rows add up", map[int]Measure{2: {MS: 4, N: 4}, 4: {MS: 6.5, N: 4}}, 3, 4, 4 + 3/7.0 + 1.25, "probe+draft fit(2,4)"},
		{"another concurrency when none at n", map[int]Measure{4: {MS: 3, N: 1}, 8: {MS: 4, N: 1}}, 2, 4, 3 + 1.0/4*1 + 0.75, "probe+draft fit(4,8)"},
	} {
		got, ok := CycleCost(c, tc.m, tc.w, tc.n)
		if !ok || !near(got.MS, tc.ms, 1e-9) || got.From != tc.from {
			t.Errorf("%s: CycleCost(W=%d, n=%d) = %+v %v, want %v from %s", tc.name, tc.w, tc.n, got, ok, tc.ms, tc.from)
		}
	}
	if _, ok := CycleCost(c, map[int]Measure{4: {MS: 4, N: 1}}, 5, 4); ok { // 20 rows: past the curve
		t.Error("extrapolated past the probed rows")
	}
	if _, ok := CycleCost(c, nil, 3, 1); ok {
		t.Error("a cost with no measured width")
	}
}

// The fit's doubt: zero where a width was measured (beside the noise),
// growing away from the widths measured, and from one width large enough
// that both extremes (all fixed, all per token) are 1.96 errors away.
func TestFitDraftUncertainty(t *testing.T) {
	c := Curve{VerifyMS: map[int]float64{1: 2, 17: 2}}
	two, _ := FitDraft(c, map[int]Measure{4: {MS: 10, N: 1}, 8: {MS: 12, N: 1}}, 1)
	_, se4 := two.At(4)
	_, se2 := two.At(2)
	_, se17 := two.At(17)
	if !(se4 < se2 && se2 < se17) {
		t.Errorf("se at 4, 2, 17: %v %v %v; want growing away from the widths measured", se4, se2, se17)
	}
	one, _ := FitDraft(c, map[int]Measure{9: {MS: 10, N: 1}}, 1)
	ms, se := one.At(1) // x = 0: the all-per-token extreme is 0 ms
	if !near(ms, 4, 1e-9) || !near(ms-DefaultZ*se, 0, 0.05) {
		t.Errorf("one width at W=1: %v ± %v, want 4 with 0 at 1.96 errors", ms, se)
	}
}

// acc builds an Acceptance of n cycles with S values.
func acc(n float64, s ...float64) Acceptance {
	a := make(Acceptance, len(s))
	for i, v := range s {
		a[i] = Obs{Count: math.Round(v * n), Cycles: n}
	}
	return a
}

func TestDecide(t *testing.T) {
	flat := Curve{VerifyMS: map[int]float64{1: 2, 2: 2, 3: 2, 4: 2, 8: 2.4, 9: 4, 12: 4.4, 16: 5}}
	rule := Rule{MinCycles: 100, Margin: 0.03, MaxWidth: 4}
	cases := []struct {
		name   string
		in     Inputs
		choice int
		sw     bool
		best   int
		reason string
		gain   float64
	}{
		{
			// Hand-computed: d = (4 − 2)/3 per drafted token; T = 1, 1.5,
			// 1.75, 1.875; cost 2, 2.667, 3.333, 4 ms; tok/s 500, 562.5,
			// 525, 468.75. Width 2 gains 562.5/468.75 − 1 = 20%.
			name: "narrower wins",
			in: Inputs{Running: 4, N: 1, Acc: acc(1000, 0.5, 0.25, 0.125), Curve: flat,
				Measured: perToken4()},
			choice: 2, sw: true, best: 2, gain: 0.2, reason: "width 2 predicted +20.0%",
		},
		{
			name: "too few cycles",
			in: Inputs{Running: 4, N: 1, Acc: acc(99, 0.5, 0.25, 0.125), Curve: flat,
				Measured: perToken4()},
			choice: 4, best: 4, reason: "too few cycles: 99 of the 100 needed",
		},
		{
			name:   "no acceptance",
			in:     Inputs{Running: 1, N: 1, Curve: flat},
			choice: 1, best: 1, reason: "no acceptance observed yet",
		},
		{
			// All three at 500 tok/s: the running width keeps it.
			name: "tie keeps the running width",
			in: Inputs{Running: 3, N: 1, Acc: acc(1000, 0.5, 0.5), Curve: flat,
				Measured: map[int]Measure{2: {MS: 3, N: 1}, 3: {MS: 4, N: 1}}},
			choice: 3, best: 3, reason: "width 3 is predicted best",
		},
		{
			// Widths 1 and 2 tie at 500 over running 3 at 400: the
			// narrower, speculation off, wins.
			name: "tie goes to the narrower",
			in: Inputs{Running: 3, N: 1, Acc: acc(1000, 0.5, 0.5), Curve: flat,
				Measured: map[int]Measure{2: {MS: 3, N: 1}, 3: {MS: 5, N: 1}}},
			choice: 1, sw: true, best: 1, gain: 0.25, reason: "width 1 predicted +25.0%",
		},
		{
			// Width 2: 1.5/2.94 → 510.2 against 500: +2%, under 3%.
			name: "under the margin",
			in: Inputs{Running: 3, N: 1, Acc: acc(1000, 0.5, 0.5), Curve: flat,
				Measured: map[int]Measure{2: {MS: 2.94, N: 1}, 3: {MS: 4, N: 1}}},
			choice: 3, best: 2, gain: 1.5/2.94*1000/500 - 1, reason: "under the 3% margin",
		},
		{
			// The narrower-wins case seen over only 100 cycles at a lower
			// S(1): the point gain is 8% but S(2..3) could be high enough
			// for width 4 to be as good.
			name: "bound not above zero",
			in: Inputs{Running: 4, N: 1, Acc: acc(100, 0.4, 0.3, 0.25), Curve: flat,
				Measured: perToken4()},
			choice: 4, best: 2, gain: (1.4/(2+2.0/3))/(1.95/4) - 1, reason: "is not above zero",
		},
		{
			// Exploring at 4 from home 2 (the narrower-wins figures): width
			// 2 is predicted best, so back home.
			name: "exploration: home is best, back to it",
			in: Inputs{Running: 4, Home: 2, N: 1, Acc: acc(1000, 0.5, 0.25, 0.125), Curve: flat,
				Measured: perToken4()},
			choice: 2, sw: true, best: 2, gain: 0, reason: "back from exploration width 4 to width 2: width 2 is predicted best",
		},
		{
			// The under-the-margin figures seen from home 1 (500 tok/s):
			// width 2's 510.2 is +2%, under 3%, so back to 1, not on to 2
			// and not staying at the exploration width.
			name: "exploration: best under the margin over home, back to it",
			in: Inputs{Running: 3, Home: 1, N: 1, Acc: acc(1000, 0.5, 0.5), Curve: flat,
				Measured: map[int]Measure{2: {MS: 2.94, N: 1}, 3: {MS: 4, N: 1}}},
			choice: 1, sw: true, best: 2, gain: 1.5/2.94*1000/500 - 1, reason: "back from exploration width 3 to width 1: width 2 predicted +2.0%, under the 3% margin",
		},
		{
			// Exploring at 3 from home 1: d = (4 − 2)/2; tok/s 500, 633.3,
			// 700. The exploration width itself beats home by 40%: stay.
			name: "exploration: the explored width wins, stay",
			in: Inputs{Running: 3, Home: 1, N: 1, Acc: acc(1000, 0.9, 0.9), Curve: flat,
				Measured: map[int]Measure{3: {MS: 4, N: 1}, 2: {MS: 3, N: 1}}},
			choice: 3, best: 3, gain: 0.4, reason: "width 3 predicted +40.0%",
		},
		{
			// Four sequences together: rows add up. W1 = 4 rows (2.2 ms),
			// W2 = 8 rows (2.4 + 1/3), W4 measured 6 ms; d = (6 − 5)/3.
			// tok/s: 1818, 2195, 1374, 1250.
			name: "concurrency",
			in: Inputs{Running: 4, N: 4, Acc: acc(1000, 0.5, 0.25, 0.125),
				Curve:    Curve{VerifyMS: map[int]float64{1: 2, 2: 2, 4: 2.2, 8: 2.4, 9: 4, 16: 5}},
				Measured: map[int]Measure{4: {MS: 6, N: 4}, 3: {MS: 4 + 3.0/7 + 2.0/3, N: 4}}},
			choice: 2, sw: true, best: 2, gain: (4000*1.5/(2.4+1.0/3))/(4000*1.875/6) - 1, reason: "width 2 predicted",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.in.Rule = rule
			d := Decide(c.in)
			if d.Choice != c.choice || d.Switch != c.sw || d.Best != c.best || !strings.Contains(d.Reason, c.reason) || !near(d.Gain, c.gain, 1e-9) {
				t.Errorf("got choice %d switch %v best %d gain %v reason %q\nwant choice %d switch %v best %d gain %v reason ~%q\n%s",
					d.Choice, d.Switch, d.Best, d.Gain, d.Reason, c.choice, c.sw, c.best, c.gain, c.reason, d)
			}
			// A switch claims a gain, except the return from an
			// exploration to the width before it.
			if d.Switch && d.Choice != c.in.Home && !(d.GainLo > 0 && d.GainLo < d.Gain) {
				t.Errorf("switch with gain lower bound %v (gain %v)", d.GainLo, d.Gain)
			}
		})
	}
}

// perToken4 is width 4 measured at 4 ms and width 3 at 3.33 ms over a
// 2 ms verify: drafting 2/3 ms per drafted token and no fixed part, so
// that the hand-computed figures of the cases read one line.
func perToken4() map[int]Measure {
	return map[int]Measure{4: {MS: 4, N: 1}, 3: {MS: 2 + 2*2.0/3, N: 1}}
}

// Hand-computed candidates of the "narrower wins" case, as logged.
func TestDecisionLine(t *testing.T) {
	flat := Curve{VerifyMS: map[int]float64{1: 2, 2: 2, 3: 2, 4: 2}}
	d := Decide(Inputs{Running: 4, N: 1, Acc: acc(1000, 0.5, 0.25, 0.125), Curve: flat,
		Measured: perToken4(), Rule: Rule{MinCycles: 100, MaxWidth: 4}})
	b, err := json.Marshal(Status{State: StateWatching, Decision: &d})
	if err != nil || !strings.Contains(string(b), `"candidates":[{"width":1,"tokens_per_cycle":1,"tokens_from":"model","cost":{"ms":2,"verify_ms":2,"draft_ms":0,"from":"probe"},"tok_per_s":500}`) {
		t.Errorf("status JSON %s, %v", b, err)
	}
	want := "adapt: switch at width 4 → 2: width 2 predicted +20.0% (lower bound +4.5%) over width 4; concurrency 1; margin 3%; S(k)="
	line := d.String()
	if !strings.HasPrefix(line, want) {
		t.Errorf("line %q\nwant prefix %q", line, want)
	}
	stay := d
	stay.Switch, stay.Choice, stay.Reason = false, 4, "width 2 predicted +1.0%, under the 3% margin"
	if got := stay.String(); !strings.HasPrefix(got, "adapt: stay at width 4: width 2 predicted") {
		t.Errorf("a stay reads %q: it names the width it keeps, once", got)
	}
	for _, part := range []string{"S(k)=1:0.500(500/1000) 2:0.250(250/1000) 3:0.125(125/1000)",
		"ms/cycle=1:2.00 2:2.67 3:3.33 4:4.00", "tok/s=1:500.0 2:562.5 3:525.0 4:468.8", "margin 3%", "concurrency 1"} {
		if !strings.Contains(line, part) {
			t.Errorf("line lacks %q:\n%s", part, line)
		}
	}
}

// A flat, high S at the last observed position makes a wider width worth
// exploring; a collapsed one does not.
func TestDecideExplore(t *testing.T) {
	c := Curve{VerifyMS: map[int]float64{1: 2, 2: 2, 3: 2, 4: 2, 5: 2.1, 6: 2.2, 7: 2.3, 8: 2.4}}
	m := map[int]Measure{4: {MS: 3, N: 1}}
	r := Rule{MinCycles: 100, MaxWidth: 8}
	if d := Decide(Inputs{Running: 4, N: 1, Acc: acc(1000, 0.9, 0.9, 0.9), Curve: c, Measured: m, Rule: r}); d.Explore == 0 {
		t.Errorf("flat 0.9: no exploration\n%s", d)
	}
	if d := Decide(Inputs{Running: 4, N: 1, Acc: acc(1000, 0.9, 0.5, 0.02), Curve: c, Measured: m, Rule: r}); d.Explore != 0 {
		t.Errorf("collapsed tail: explore %d\n%s", d.Explore, d)
	}
}
