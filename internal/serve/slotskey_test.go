package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/adapt"
	"github.com/speclaunch/speclaunch/internal/control"
	"github.com/speclaunch/speclaunch/internal/proxy"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

func TestPropsSlots(t *testing.T) {
	for _, c := range []struct {
		body string
		want int // 0: an error
	}{
		{`{"total_slots":8,"default_generation_settings":{}}`, 8},
		{`{"total_slots":1}`, 1},
		{`{"total_slots":0}`, 0},
		{`{"total_slots":-4}`, 0},
		{`{}`, 0},
		{`not json`, 0},
	} {
		n, err := propsSlots(strings.NewReader(c.body))
		if n != c.want || (err == nil) != (c.want > 0) {
			t.Errorf("%s: %d, %v; want %d", c.body, n, err, c.want)
		}
	}
}

// The saved state's key holds the first engine's slots (its /props
// total_slots): a state learnt under -np 4 is not resumed by an engine of
// 8 slots, and the line says the slots changed; one learnt under 8 is.
// The key's slots were never set, so the -np 4 state was resumed.
func TestStateKeyedByTheEngineSlots(t *testing.T) {
	srv := propsEngine(t, 8)
	models := testModels
	c := control.New(control.Config{Default: schedule.Flat(4, "engine default")})
	for _, tc := range []struct {
		name   string
		slots  int
		resume bool
		line   string
	}{
		{"learnt under -np 4", 4, false, "not resumed: the engine's slots (4, now 8) changed since"},
		{"learnt under -np 8", 8, true, "resuming what an earlier run learnt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			old := adapt.CacheKey{Engine: "sim", GPU: "none", Capability: "12.1", Models: models, Slots: tc.slots}
			p := c.Init(control.Pair{}).Pair
			p.Schedule[0].Width, p.Schedule[0].Source = 8, "measured"
			writeState(t, dir, savedPair{Key: old, Saved: time.Now().Add(-time.Hour), Pair: p})
			var log bytes.Buffer
			key := old
			key.Slots = 0 // as adaptCache makes it, before any engine
			sh := &controlShell{c: c, client: srv.Client(), dir: dir, key: key, log: slog.New(slog.NewTextHandler(&log, nil))}
			if err := sh.BeforeTraffic(context.Background(), adapt.Target{BaseURL: srv.URL, Gen: 1, Pair: "t\x00d"}, true); err != nil {
				t.Fatal(err)
			}
			if sh.key.Slots != 8 || (sh.resumed != "") != tc.resume || !strings.Contains(log.String(), tc.line) {
				t.Errorf("key slots %d, resumed %q; want 8 and resumed %v, and the log with %q:\n%s", sh.key.Slots, sh.resumed, tc.resume, tc.line, log.String())
			}
			if want := controlFile(dir, adapt.CacheKey{Engine: "sim", GPU: "none", Capability: "12.1", Models: models, Slots: 8}); sh.file != want {
				t.Errorf("file %s, want %s", sh.file, want)
			}
		})
	}
}

// A later engine of other slots (a reload changed -np) stops the saves
// under the key the first engine's slots made, said once: the next start
// under those slots would resume what was learnt under others. An engine
// of the key's slots again resumes them, said once (a user pass went back
// to -np 4 and nothing more was saved). The state's own engine slots
// decide: until the controller has seen the new engine, its state is
// still the old engine's.
func TestLaterEngineOfOtherSlotsStopsTheSaves(t *testing.T) {
	four, eight := propsEngine(t, 4), propsEngine(t, 8)
	c := control.New(control.Config{Default: schedule.Flat(4, "engine default")})
	var log bytes.Buffer
	sh := &controlShell{c: c, client: four.Client(), dir: t.TempDir(), key: adapt.CacheKey{Engine: "sim", Models: testModels}, log: slog.New(slog.NewTextHandler(&log, nil))}
	saved := func(slots int) bool {
		os.Remove(sh.file)
		s := c.Init(control.Pair{})
		s.Engine.Slots = slots
		sh.save(s, time.Now(), false)
		_, err := os.Stat(sh.file)
		return err == nil
	}
	for i, step := range []struct {
		srv        *httptest.Server
		stateSlots int
		want       bool
	}{
		{four, 4, true},
		{four, 4, true},  // a later engine of the same slots
		{eight, 4, true}, // routed, not yet scraped: the state is the 4-slot engine's
		{eight, 8, false},
		{eight, 8, false},
		{four, 8, false}, // back to 4, not yet scraped
		{four, 4, true},
	} {
		if err := sh.BeforeTraffic(context.Background(), adapt.Target{BaseURL: step.srv.URL, Gen: uint64(i + 1), Pair: "t\x00d"}, i == 0); err != nil {
			t.Fatal(err)
		}
		if got := saved(step.stateSlots); got != step.want {
			t.Errorf("engine %d, a state of %d slots: saved %v, want %v", i+1, step.stateSlots, got, step.want)
		}
	}
	if n := strings.Count(log.String(), "the new engine has 8 slots where the saved state is keyed by 4"); n != 1 {
		t.Errorf("the parting said %d times, want once:\n%s", n, log.String())
	}
	if n := strings.Count(log.String(), "the new engine has 4 slots again, as the saved state is keyed"); n != 1 {
		t.Errorf("the meeting said %d times, want once:\n%s", n, log.String())
	}
}

// An engine that said no slots keys the state without them, and a later
// one that says its slots does not stop the saves (a review: "keyed by
// 0" stopped them for the run).
func TestLaterEngineAfterOneOfNoSlotsKeepsSaving(t *testing.T) {
	silent := httptest.NewServer(http.NotFoundHandler())
	defer silent.Close()
	four := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"total_slots":4}`)) }))
	defer four.Close()
	c := control.New(control.Config{Default: schedule.Flat(4, "engine default")})
	var log bytes.Buffer
	sh := &controlShell{c: c, client: four.Client(), dir: t.TempDir(), key: adapt.CacheKey{Engine: "sim"}, log: slog.New(slog.NewTextHandler(&log, nil))}
	for i, srv := range []*httptest.Server{silent, four} {
		if err := sh.BeforeTraffic(context.Background(), adapt.Target{BaseURL: srv.URL, Gen: uint64(i + 1), Pair: "t\x00d"}, i == 0); err != nil {
			t.Fatal(err)
		}
	}
	sh.save(c.Init(control.Pair{}), time.Now(), false)
	if _, err := os.Stat(sh.file); err != nil || strings.Contains(log.String(), "where the saved state is keyed by") {
		t.Errorf("saves stopped after an engine of no slots (%v):\n%s", err, log.String())
	}
}

// A start resumes at the width the newest state saved for its pair learnt
// for one request in flight, whatever the state's slots (an engine says
// them only once it runs); nothing where that bucket holds the default's
// width, or the model content, engine or GPU changed (moved files are
// the same pair: the key holds content, not paths). A restart started at the default and switched a window
// later, with no traffic.
func TestResumedWidth(t *testing.T) {
	models := testModels
	key := adapt.CacheKey{Engine: "sim", GPU: "none", Capability: "12.1", Models: models}
	c := control.New(control.Config{Default: schedule.Flat(16, "engine default")})
	learnt := func(w int, source string) control.Pair {
		p := c.Init(control.Pair{}).Pair
		p.Schedule[0].Width, p.Schedule[0].Source = w, source
		p.Verify = map[int]float64{1: 3}
		return p
	}
	type state struct {
		key  adapt.CacheKey
		pair control.Pair
		age  time.Duration
	}
	with := func(f func(*adapt.CacheKey)) adapt.CacheKey {
		k := key
		k.Models = slices.Clone(models)
		f(&k)
		return k
	}
	for _, tc := range []struct {
		name   string
		states []state
		want   int
	}{
		{"learnt under 4 slots", []state{{with(func(k *adapt.CacheKey) { k.Slots = 4 }), learnt(4, "measured"), time.Hour}}, 4},
		{"the newest of two", []state{{with(func(k *adapt.CacheKey) { k.Slots = 4 }), learnt(4, "measured"), 2 * time.Hour}, {with(func(k *adapt.CacheKey) { k.Slots = 8 }), learnt(6, "measured"), time.Hour}}, 6},
		{"the default's width at one request", []state{{key, learnt(16, "default width 16"), time.Hour}}, 0},
		{"the target's content changed", []state{{with(func(k *adapt.CacheKey) { k.Models[0].SHA256 = "cc" }), learnt(4, "measured"), time.Hour}}, 0},
		{"another engine", []state{{with(func(k *adapt.CacheKey) { k.Engine = "llama.cpp b1" }), learnt(4, "measured"), time.Hour}}, 0},
		{"the drafter moved", []state{{with(func(k *adapt.CacheKey) { k.Models[1].Path = "/m/other" }), learnt(4, "measured"), time.Hour}}, 4},
		{"another drafter", []state{{with(func(k *adapt.CacheKey) { k.Models[1].SHA256 = "dd" }), learnt(4, "measured"), time.Hour}}, 0},
		{"none", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, st := range tc.states {
				f := writeState(t, dir, savedPair{Key: st.key, Saved: time.Now().Add(-st.age), Pair: st.pair})
				mod := time.Now().Add(-st.age)
				if err := os.Chtimes(f, mod, mod); err != nil {
					t.Fatal(err)
				}
			}
			w, why := resumedWidth(dir, key, time.Now())
			if w != tc.want || (w > 0) != strings.HasPrefix(why, "resumed: learnt for 1 request in flight by an earlier run (saved ") {
				t.Errorf("resumed width %d (%q), want %d", w, why, tc.want)
			}
		})
	}
}

// Each engine's slots, read before it takes traffic, go with every scrape
// of it (the controller prices a load above them as the slots' load), also
// where nothing is saved; an engine that does not say them scrapes 0.
func TestScrapeSaysTheEngineSlots(t *testing.T) {
	engine := func(props string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/props" && props != "" {
				w.Write([]byte(props))
				return
			}
			if r.URL.Path == "/props" {
				http.NotFound(w, r)
			}
		}))
	}
	one, silent := engine(`{"total_slots":1}`), engine("")
	defer one.Close()
	defer silent.Close()
	eng := &fakeEngines{}
	sh := &controlShell{c: control.New(control.Config{Default: schedule.Flat(4, "engine default")}), client: one.Client(), eng: eng, rt: fakeRuntime{inFlight: 4},
		log: slog.New(slog.DiscardHandler)}
	sh.hasCurve.Store(true) // a verify cost is known: no probe before traffic
	for i, tc := range []struct {
		srv  *httptest.Server
		want int
	}{{one, 1}, {silent, 0}} {
		gen := uint64(i + 1)
		if err := sh.BeforeTraffic(context.Background(), adapt.Target{BaseURL: tc.srv.URL, Gen: gen, Pair: "t\x00d"}, i == 0); err != nil {
			t.Fatal(err)
		}
		b, err := proxy.NewBackend(tc.srv.URL, fmt.Sprintf("engine %d", gen))
		if err != nil {
			t.Fatal(err)
		}
		eng.cur = &server.Instance{ID: server.EngineID(gen), Backend: b, Plan: defaultPlan(1)}
		o, err := sh.scrape(context.Background(), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if o.Slots != tc.want {
			t.Errorf("engine %d: the scrape says %d slots, want %d", gen, o.Slots, tc.want)
		}
	}
}

// The serving engine keeps its slots through later starts that never
// served (failed, or still probing before traffic): only the engines
// before the one a scrape reads are dropped. Dropped by the newest start,
// a serving engine that outlived failed starts read 0.
func TestServingEngineKeepsItsSlots(t *testing.T) {
	one, four := propsEngine(t, 1), propsEngine(t, 4)
	sh := &controlShell{client: one.Client()}
	for i, srv := range []*httptest.Server{one, four, four, four, four} { // engines 5 to 9, in turn
		if _, err := sh.slotsOf(context.Background(), adapt.Target{BaseURL: srv.URL, Gen: uint64(5 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := sh.engineSlotsOf(5); got != 1 {
		t.Errorf("serving engine 5 after four later starts: %d slots, want 1", got)
	}
	if got := sh.engineSlotsOf(9); got != 4 || len(sh.slots) != 1 {
		t.Errorf("engine 9 serving: %d slots and %d engines kept, want 4 and 1", got, len(sh.slots))
	}
}

// A scrape counts a request that waited in a one-slot engine's queue by
// its share of the time (Served at the engine's slots), not every second
// of it.
func TestScrapeCountsTheQueueByShare(t *testing.T) {
	release := make(chan struct{})
	eng := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/props":
			w.Write([]byte(`{"total_slots":1}`))
		case "/completion":
			<-release
			w.Write([]byte(`{"content":"x"}`))
		}
	}))
	defer eng.Close()
	b, err := proxy.NewBackend(eng.URL, "engine 1")
	if err != nil {
		t.Fatal(err)
	}
	p := proxy.New(proxy.Options{})
	p.Route(b)
	front := httptest.NewServer(p)
	defer front.Close()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(front.URL+"/completion", "application/json", strings.NewReader(`{"prompt":"a"}`))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	testenv.WaitFor(t, "both requests in flight", func() bool { return b.InFlight() == 2 })
	close(release)
	wg.Wait()
	testenv.WaitFor(t, "both counted out", func() bool { _, n := b.Served(0); return n == 2 })
	sh := &controlShell{c: control.New(control.Config{Default: schedule.Flat(4, "engine default")}), client: eng.Client(), eng: &fakeEngines{cur: &server.Instance{ID: 1, Backend: b, Plan: defaultPlan(1)}},
		rt: fakeRuntime{inFlight: 2}, log: slog.New(slog.DiscardHandler)}
	sh.hasCurve.Store(true)
	if err := sh.BeforeTraffic(context.Background(), adapt.Target{BaseURL: eng.URL, Gen: 1, Pair: "t\x00d"}, true); err != nil {
		t.Fatal(err)
	}
	o, err := sh.scrape(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	share, _ := b.Served(1)
	all, _ := b.Served(0)
	if o.Counters.Secs != share || share >= all {
		t.Errorf("the scrape counted %g s; want the share %g, below every second %g", o.Counters.Secs, share, all)
	}
}

// A state saved before a queued request was counted by its share loses
// what it measured at loads above the engine's slots, said; one saved
// since keeps it.
func TestOldStateLearnsTheQueuedLoadsAgain(t *testing.T) {
	srv := propsEngine(t, 1)
	models := testModels
	c := control.New(control.Config{Default: schedule.Flat(4, "engine default")})
	for _, tc := range []struct {
		counted string
		kept    bool
	}{{"", false}, {shareCounted, true}} {
		dir := t.TempDir()
		key := adapt.CacheKey{Engine: "sim", GPU: "none", Capability: "12.1", Models: models, Slots: 1}
		p := c.Init(control.Pair{}).Pair
		p.Buckets[0].Runs[6] = []control.Run{{Engine: 1, Tokens: 100, Secs: 1}}
		p.Buckets[1].Runs[6] = []control.Run{{Engine: 1, Tokens: 100, Secs: 4}}
		p.Buckets[1].N = 4 // four in flight on the one slot
		p.Schedule[0].Width, p.Schedule[0].Source = 6, "measured"
		writeState(t, dir, savedPair{Key: key, Saved: time.Now().Add(-time.Hour), Pair: p, Counted: tc.counted})
		var log bytes.Buffer
		key.Slots = 0
		sh := &controlShell{c: c, client: srv.Client(), dir: dir, key: key, log: slog.New(slog.NewTextHandler(&log, nil))}
		if err := sh.BeforeTraffic(context.Background(), adapt.Target{BaseURL: srv.URL, Gen: 1, Pair: "t\x00d"}, true); err != nil {
			t.Fatal(err)
		}
		said := strings.Contains(log.String(), "is learnt again: that state counted every second")
		if got := len(sh.initial.Buckets[1].Runs) > 0; got != tc.kept || said == tc.kept || len(sh.initial.Buckets[0].Runs) == 0 {
			t.Errorf("counted %q: 2-4 runs kept %v, said %v, one-request runs %d; want kept %v:\n%s", tc.counted, got, said, len(sh.initial.Buckets[0].Runs), tc.kept, log.String())
		}
		sh.save(c.Init(sh.initial), time.Now(), false) // saved since: marked
		if b, err := os.ReadFile(sh.file); err != nil || !strings.Contains(string(b), `"counted":"slot share"`) {
			t.Errorf("counted %q: the state saved again is not marked (%v): %.200s", tc.counted, err, b)
		}
	}
}

// propsEngine is an engine that says its slots at /props and fails every
// other request (a probe before traffic ends at once), closed with t.
func propsEngine(t *testing.T, slots int) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/props" {
			http.Error(w, "no", http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, `{"total_slots":%d}`, slots)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// writeState saves sp in dir under its key's file, as the shell names it,
// and returns that file.
func writeState(t *testing.T, dir string, sp savedPair) string {
	t.Helper()
	b, err := json.Marshal(sp)
	if err != nil {
		t.Fatal(err)
	}
	f := controlFile(dir, sp.Key)
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// testModels are a target and a drafter as a state's key holds them.
var testModels = []adapt.ModelFile{{Path: "/m/t", Size: 100, SHA256: "aa"}, {Path: "/m/d", Size: 10, SHA256: "bb"}}
