package control

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/follow"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// A saved Pair is taken only inside bounds: a hostile or damaged file
// must not make the controller allocate, loop or switch to a width no
// engine runs.
func TestPairCheck(t *testing.T) {
	good := func() Pair {
		c := New(Config{Default: schedule.Flat(4, "default")})
		p := c.Init(Pair{}).Pair
		p.Acc, p.Cycles = []float64{50, 20}, []float64{100, 100}
		p.Verify = map[int]float64{1: 3, 2: 3.2}
		p.Buckets[0].Runs[4] = []Run{{Tokens: 100, Secs: 1, Cycles: 40, Scrapes: 5, SumR: 500, SumR2: 50000, SumT: 12, SumT2: 30}}
		p.Buckets[0].Tried[0], p.Buckets[1].Tried[3] = t0, t0 // the probe's, and a trial's
		return p
	}
	cases := []struct {
		name string
		edit func(*Pair)
		want string // in the reason; "" = taken
	}{
		{"as saved", func(*Pair) {}, ""},
		{"acceptance and cycles of other lengths", func(p *Pair) { p.Cycles = p.Cycles[:1] }, "acceptance positions"},
		{"more accepted than cycles", func(p *Pair) { p.Acc[0] = 500 }, "position 1"},
		{"a NaN verify cost", func(p *Pair) { p.Verify[3] = math.NaN() }, "verify cost"},
		{"a width no engine runs", func(p *Pair) { p.Buckets[0].Runs[9999] = nil }, "width 9999"},
		{"a run out of bounds", func(p *Pair) { p.Buckets[0].Runs[4][0].Secs = math.Inf(1) }, "out of bounds"},
		{"a schedule with a width below 1", func(p *Pair) { p.Schedule[0].Width = 0 }, "the schedule"},
		{"a negative switch time", func(p *Pair) { p.SwitchS = -1 }, "switch time"},
		{"a kept traffic", func(p *Pair) {
			p.Regimes = []Regime{{Runs: []map[int][]Run{p.Buckets[0].Runs}, Acc: []float64{5}, Cycles: []float64{10}}}
		}, ""},
		{"too many kept traffics", func(p *Pair) { p.Regimes = make([]Regime, maxRegimes+1) }, "traffic regimes"},
		{"a kept traffic's run out of bounds", func(p *Pair) {
			p.Regimes = []Regime{{Runs: []map[int][]Run{{4: {{Secs: math.NaN()}}}}}}
		}, "a traffic regime"},
		{"a kept traffic accepting more than its cycles", func(p *Pair) { p.Regimes = []Regime{{Acc: []float64{50}, Cycles: []float64{10}}} }, "regime's position 1"},
		{"a bucket's acceptance", func(p *Pair) { p.Buckets[0].Acc, p.Buckets[0].Cycles = []float64{5}, []float64{10} }, ""},
		{"a bucket accepting more than its cycles", func(p *Pair) { p.Buckets[0].Acc, p.Buckets[0].Cycles = []float64{50}, []float64{10} }, "bucket 1-1: position 1"},
		{"a bucket's acceptance of other lengths", func(p *Pair) { p.Buckets[0].Acc, p.Buckets[0].Cycles = []float64{5, 5}, []float64{10} }, "acceptance positions"},
		{"too many changes of traffic", func(p *Pair) { p.Changes = make([]time.Time, maxChanges+1) }, "changes of traffic"},
		{"decisions below 0", func(p *Pair) { p.Decisions = -1 }, "Decisions -1, below 0"},
		{"decisions past any run's", func(p *Pair) { p.Decisions = 1 << 62 }, "Decisions 4611686018427387904"},
		{"a load bucket upside down", func(p *Pair) { p.Buckets[0].Lo, p.Buckets[0].Hi = 1e18, -5 }, "the load buckets: bucket 1 (1000000000000000000--5) starts at"},
		{"a load bucket ending below its start", func(p *Pair) { p.Buckets[1].Hi = 1 }, "the load buckets: bucket 2 (2-1) ends below where it starts"},
		{"a width tried past the widest", func(p *Pair) { p.Buckets[0].Tried[1000000000] = t0 }, "Tried of width 1000000000"},
		{"a width tried below 0", func(p *Pair) { p.Buckets[0].Tried[-3] = t0 }, "Tried of width -3"},
		{"a schedule without its load buckets", func(p *Pair) { p.Buckets = nil }, "a schedule of 4 buckets beside 0 load buckets"},
		{"a bucket's samples below 0", func(p *Pair) { p.Buckets[0].NSamples = -1 }, "bucket 1-1: NSamples -1"},
		{"a bucket's load out of bounds", func(p *Pair) { p.Buckets[1].N = 1e300 }, "bucket 2-4: load 1e+300, below 0 or out of bounds"},
		{"a bucket's load below 0", func(p *Pair) { p.Buckets[1].N = -3 }, "bucket 2-4: load -3, below 0"},
		{"runs of more widths than a state holds", func(p *Pair) {
			for w := range maxSavedWidth + 1 {
				p.Buckets[1].Runs[w+1] = nil
			}
		}, "bucket 2-4: runs of"},
		{"saved in year 9999", func(p *Pair) { p.Saved = year9999 }, "Saved 9999-12-31T00:00:00Z is later than now"},
		{"saved a minute ahead (a clock stepped back)", func(p *Pair) { p.Saved = t0.Add(time.Minute) }, ""},
		{"a width tried in year 9999", func(p *Pair) { p.Buckets[0].Tried[4] = year9999 }, "bucket 1-1: Tried of width 4 9999-12-31T00:00:00Z is later than now"},
		{"a run in year 9999", func(p *Pair) { p.Buckets[0].Runs[4][0].At = year9999 }, "At of a run of width 4 9999"},
		{"a change of traffic in year 9999", func(p *Pair) { p.Changes = []time.Time{year9999} }, "Changes 9999"},
		{"a kept traffic in year 9999", func(p *Pair) { p.Regimes = []Regime{{At: year9999}} }, "a traffic regime: At 9999"},
		{"a kept traffic's run in year 9999", func(p *Pair) {
			p.Regimes = []Regime{{Runs: []map[int][]Run{{4: {{At: year9999}}}}}}
		}, "a traffic regime: At of a run of width 4 9999"},
	}
	for _, tc := range cases {
		p := good()
		tc.edit(&p)
		got := p.Check(t0)
		if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: Check() = %q, want %q", tc.name, got, tc.want)
		}
	}
}

var year9999 = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// A saved state is resumed only when it holds something learnt and every
// time in it has come: "pair": null, or one with nothing but the default's
// widths, is nothing to resume (no word), and a file saved in year 9999
// is refused by its field. Before, both were resumed, the first said as
// "resuming what an earlier run learnt".
func TestResume(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	fresh := c.Init(Pair{}).Pair
	learnt := c.Init(Pair{}).Pair
	learnt.Buckets[0].Runs[4] = []Run{{Tokens: 100, Secs: 1, Cycles: 40, Scrapes: 5, SumR: 500, SumR2: 50000, SumT: 12, SumT2: 30}}
	tried := c.Init(Pair{}).Pair
	tried.Buckets[1].Tried[6] = t0.Add(-time.Hour)
	decided := c.Init(Pair{}).Pair
	decided.Schedule[0].Width, decided.Schedule[0].Source = 8, "measured"
	negative := learnt
	negative.Decisions = -1
	for _, tc := range []struct {
		name  string
		saved time.Time
		p     Pair
		take  bool
		why   string // in the reason
	}{
		{`"pair": null`, t0.Add(-time.Hour), Pair{}, false, ""},
		{"the default's widths alone", t0.Add(-time.Hour), fresh, false, ""},
		{"a run", t0.Add(-time.Hour), learnt, true, ""},
		{"a width tried", t0.Add(-time.Hour), tried, true, ""},
		{"a width decided", t0.Add(-time.Hour), decided, true, ""},
		{"no saved time", time.Time{}, learnt, true, ""},
		{"saved in year 9999", year9999, learnt, false, "saved 9999-12-31T00:00:00Z is later than now"},
		{"saved in year 9999 with nothing learnt", year9999, Pair{}, false, "saved 9999"},
		{"decisions below 0", t0.Add(-time.Hour), negative, false, "Decisions -1"},
	} {
		take, why := Resume(tc.saved, tc.p, t0)
		if take != tc.take || (tc.why == "") != (why == "") || !strings.Contains(why, tc.why) {
			t.Errorf("%s: Resume = %v, %q; want %v, %q", tc.name, take, why, tc.take, tc.why)
		}
	}
}

// The status says what the controller does and the evidence per bucket.
func TestStatus(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	s := c.Init(Pair{})
	s.Engine.Width, s.Load.Bucket = 4, 1
	if st := s.Status(t0); st.State != "watching" || st.Measuring != "2-4" || st.Bucket != "" || st.Schedule != s.Pair.Schedule.String() || len(st.Buckets) != 4 {
		t.Errorf("status %+v", st)
	}
	// No trial judged: no prediction error (null), not a perfect 0. The
	// slots are said once known.
	if b, _ := json.Marshal(s.Status(t0)); !strings.Contains(string(b), `"prediction_error":null`) || strings.Contains(string(b), `"slots"`) {
		t.Errorf("status before a judged trial: %s, want prediction_error null and no slots", b)
	}
	s.Engine.Slots = 1
	if b, _ := json.Marshal(s.Status(t0)); !strings.Contains(string(b), `"slots":1`) {
		t.Errorf("status of a one-slot engine: %s, want slots 1", b)
	}
	s.Engine.Slots = 0
	s.Follow.Last = follow.Decision{From: s.Pair.Schedule[1], To: s.Pair.Schedule[2], Load: 5, Reason: "the load has been at 5-8 requests in flight for 5s (mean 5.0)"} // a decision's load is to a tenth
	if st := s.Status(t0); st.Bucket != "5-8" || st.Load != 5 || !strings.Contains(st.Follow, "5-8") {
		t.Errorf("status of the bucket in force %+v", st)
	}
	s.Follow.State.Pending = 6
	if st := s.Status(t0); st.State != "switching" || !strings.Contains(st.Note, "width 6") {
		t.Errorf("status while a switch is under way %+v", st)
	}
	s.Follow.State.Pending = 0
	for _, tc := range []struct {
		name            string
		serving, loadAt int
		ran             bool
		want            string
	}{
		{"the trial's width serves", 8, 1, true, "measuring width 8 at 2-4 requests in flight before judging it: why"},
		{"the switch to it not yet made", 4, 1, false, "width 8 is to be tried at 2-4 requests in flight: waiting for the switch to it (why)"},
		{"the load left its bucket", 4, 0, false, "the trial of width 8 at 2-4 requests in flight is paused: the load left 2-4 requests in flight, and width 4 serves"},
		{"served, then left by the follower", 4, 1, true, "the trial of width 8 at 2-4 requests in flight is paused: width 4 serves, and the next decision there judges or ends it"},
		{"its width serves where the load left", 8, 0, true, "the trial of width 8 at 2-4 requests in flight is paused: the load left 2-4 requests in flight, and width 8 serves"},
	} {
		s.Exp = Experiment{Kind: Trialing, Width: 8, Bucket: 1, Reason: "why", Ran: tc.ran}
		s.Engine.Width, s.Load.Bucket = tc.serving, tc.loadAt
		if st := s.Status(t0); st.State != "trial" || st.Note != tc.want {
			t.Errorf("%s: status in a trial %q %q, want trial %q", tc.name, st.State, st.Note, tc.want)
		}
	}
	s.Engine.Width, s.Load.Bucket = 4, 1
	s.Exp = Experiment{HoldUntil: t0.Add(time.Minute)}
	if st := s.Status(t0); st.State != "holding" {
		t.Errorf("status after a failed switch %+v", st)
	}
}

// Before a full window the follower's decision names no bucket: the
// status names none either, not "0+".
func TestStatusNamesNoBucketBeforeAWindow(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	s := c.Init(Pair{})
	s.Follow.Last = follow.Decision{From: schedule.Bucket{Width: 4}}
	if st := s.Status(t0); st.Bucket != "" {
		t.Errorf("bucket %q before a full window, want none", st.Bucket)
	}
	s.Engine.Width = 4
	s.Follow.Last = follow.Decision{From: schedule.Bucket{Lo: 1, Hi: 1, Width: 4}, To: schedule.Bucket{Lo: 1, Hi: 1, Width: 4}, Load: 1}
	if st := s.Status(t0); st.Bucket != "1" {
		t.Errorf("bucket %q at one request, want 1", st.Bucket)
	}
}

// The bucket shown is the load's, where its width runs; none while
// another width serves there (a trial's width 1 in force at 2-4, width 4
// serving): a pass saw "5-8", the first bucket holding width 4, with four
// requests in flight.
func TestStatusBucketIsTheLoads(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	s := c.Init(Pair{})
	s.Engine.Width = 4
	trial := schedule.Bucket{Lo: 2, Hi: 4, Width: 1, Source: "trial: width 1 predicted +19%"}
	s.Follow.Last = follow.Decision{From: s.Pair.Schedule[2], To: trial, Load: 4, Reason: "the load has been at 2-4 requests in flight for 5s (mean 4.0)"}
	if st := s.Status(t0); st.Bucket != "" || st.Load != 4 {
		t.Errorf("bucket %q, load %v; want none and 4", st.Bucket, st.Load)
	}
}

// A width the schedule in force has nowhere (a trial's, once the load
// left its bucket) names no bucket, but the load and the follower's word
// stay: a campaign saw "load": 0 with four clients in flight, and no
// word, for 10-60 s after such switches.
func TestStatusShowsTheLoadBesideAWidthInNoBucket(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	s := c.Init(Pair{})
	s.Engine.Width = 8
	s.Follow.Last = follow.Decision{From: schedule.Bucket{Width: 8, Source: "running"}, To: s.Pair.Schedule[1], Load: 4, Reason: "the load has been at 2-4 requests in flight for 5s (mean 4.0)"}
	if st := s.Status(t0); st.Bucket != "" || st.Load != 4 || st.Follow != s.Follow.Last.Reason {
		t.Errorf("bucket %q, load %v, follow %q; want none, 4 and the follower's word", st.Bucket, st.Load, st.Follow)
	}
}

// After an engine change the follower reads the load again over a full
// window; meanwhile the status shows the load last read and says so, not
// "load": 0 (a review: 8-10 s of 0 after each switch, four clients in
// flight).
func TestStatusKeepsTheLoadWhileTheWindowRefills(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	s := c.Init(Pair{})
	now := t0
	step := func(busy string) {
		now = now.Add(follow.Tick)
		s, _ = c.Step(s, Observation{Kind: Sample, Now: now, Width: 4, InFlight: 4, Busy: busy})
	}
	for range 60 { // 15 s: a full window
		step("")
	}
	if st := s.Status(now); st.Load != 4 || st.Bucket != "2-4" {
		t.Fatalf("after a window at 4 in flight: load %v, bucket %q", st.Load, st.Bucket)
	}
	step("an engine starts beside the serving one")
	step("") // the spell ended: the window restarts
	st := s.Status(now)
	if st.Load != 4 || !strings.Contains(st.Follow, "read again") {
		t.Errorf("while the window refills: load %v, follow %q; want 4 and that it is read again", st.Load, st.Follow)
	}
}

// The width shown is the follower's, which its samples set four times a
// second: before the first scrape the engine's is 0 (a pass saw "width":
// 0 for a second after the first probe).
func TestStatusWidthBeforeTheFirstScrape(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	s := c.Init(Pair{})
	s, _ = c.Step(s, Observation{Kind: Sample, Now: t0, Width: 4, InFlight: 1})
	if st := s.Status(t0); st.Width != 4 {
		t.Errorf("width %d before the first scrape, want 4", st.Width)
	}
}

// DropQueued clears the runs and learnt widths of the buckets whose mean
// load was above the slots, in the regimes too, only those that hold runs.
func TestDropQueued(t *testing.T) {
	c := New(Config{Default: schedule.Flat(4, "default")})
	learnt := func() Pair {
		p := c.Init(Pair{}).Pair
		for i, n := range []float64{1, 3.8, 6, 0} { // mean loads; the last bucket holds no runs
			p.Buckets[i].N = n
			if n > 0 {
				p.Buckets[i].Runs[6] = []Run{{Engine: 1, Tokens: 100, Secs: 1}}
				p.Schedule[i].Width, p.Schedule[i].Source = 6, "measured"
			}
		}
		p.Regimes = []Regime{{Runs: []map[int][]Run{{6: {{Engine: 1}}}, {6: {{Engine: 1}}}, {6: {{Engine: 1}}}, {}}}}
		return p
	}
	for _, tc := range []struct {
		slots   int
		cleared int
		kept    []bool // by bucket: runs kept
	}{
		{0, 0, []bool{true, true, true, false}},
		{1, 2, []bool{true, false, false, false}},
		{2, 2, []bool{true, false, false, false}}, // 2-4 at a mean of 3.8 queued on two
		{4, 1, []bool{true, true, false, false}},
		{8, 0, []bool{true, true, true, false}},
	} {
		in := learnt()
		p, n := c.DropQueued(in, tc.slots)
		if n != tc.cleared {
			t.Errorf("%d slots: cleared %d buckets, want %d", tc.slots, n, tc.cleared)
		}
		for i, k := range tc.kept {
			if got := len(p.Buckets[i].Runs) > 0; got != k {
				t.Errorf("%d slots: bucket %s runs kept %v, want %v", tc.slots, p.Schedule[i].Range(), got, k)
			}
			if got := len(p.Regimes[0].Runs[i]) > 0; got != k {
				t.Errorf("%d slots: bucket %s runs kept in the regime %v, want %v", tc.slots, p.Schedule[i].Range(), got, k)
			}
			if !k && p.Schedule[i].Width != 4 && i < len(tc.kept)-1 {
				t.Errorf("%d slots: bucket %s width %d, want the default 4", tc.slots, p.Schedule[i].Range(), p.Schedule[i].Width)
			}
		}
		if len(in.Buckets[1].Runs) == 0 || len(in.Regimes[0].Runs[1]) == 0 {
			t.Errorf("%d slots: the pair given was written into", tc.slots)
		}
	}
}
