package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/adapt"
	"github.com/speclaunch/speclaunch/internal/control"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// TestControlLoadFitsSavedBuckets: a state saved under the fixed buckets,
// read by a run whose starting schedule splits them (1-3:6,4+:1), resumes
// on this run's buckets, says so once in the log, and runs width 1 at 4.
func TestControlLoadFitsSavedBuckets(t *testing.T) {
	key := adapt.CacheKey{Engine: "sim", GPU: "none", Capability: "12.1"}
	flat := control.New(control.Config{Default: schedule.Flat(4, "engine default")})
	p := flat.Init(control.Pair{}).Pair
	p.Schedule[0].Width, p.Schedule[0].Source = 8, "measured"
	file := filepath.Join(t.TempDir(), "adapt-control-x.json")
	b, err := json.Marshal(savedPair{Key: key, Saved: time.Unix(1_700_000_000, 0), Pair: p})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	tuned, err := schedule.Parse("1-3:6,4+:1", "tuned")
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	sh := &controlShell{c: control.New(control.Config{Default: tuned}), file: file, key: key, log: slog.New(slog.NewTextHandler(&log, nil))}
	got := sh.load()
	if s := got.Schedule.String(); s != "1:8,2-3:6,4:1,5-8:1,9+:1" {
		t.Errorf("resumed schedule %s, want 1:8,2-3:6,4:1,5-8:1,9+:1", s)
	}
	if n := strings.Count(log.String(), "are not this run's"); n != 1 || !strings.Contains(log.String(), "kept: 1, 5-8, 9+") {
		t.Errorf("the log says the buckets changed %d times, want once with what was kept:\n%s", n, log.String())
	}
}

// The adaptive state file is speclaunch's own: a symlink at its path is
// replaced by the saved file, said once with its target, and the file it
// pointed to is left as it was. Before, the save wrote through the link,
// over that file (and made it 0600), even one the load had refused.
func TestControlSaveReplacesALink(t *testing.T) {
	dir := t.TempDir()
	file, theirs := filepath.Join(dir, "adapt-control-x.json"), filepath.Join(dir, "theirs.txt")
	if err := os.WriteFile(theirs, []byte("not a state"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(theirs, file); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	key := adapt.CacheKey{Engine: "sim", GPU: "none", Capability: "12.1"}
	c := control.New(control.Config{Default: schedule.Flat(4, "engine default")})
	sh := &controlShell{c: c, file: file, key: key, log: slog.New(slog.NewTextHandler(&log, nil))}
	if p := sh.load(); len(p.Schedule) != 0 {
		t.Fatalf("the load resumed %v from a file that is no state", p.Schedule)
	}
	s := c.Init(control.Pair{})
	sh.save(s, time.Now(), false)
	sh.save(s, time.Now(), false)
	if b, _ := os.ReadFile(theirs); string(b) != "not a state" {
		t.Errorf("the link's target holds %q: the save wrote through the link", b)
	}
	if fi, err := os.Stat(theirs); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("the link's target is %v (%v), want mode 0644 as it was", fi, err)
	}
	if li, err := os.Lstat(file); err != nil || !li.Mode().IsRegular() {
		t.Errorf("the state file is %v (%v), want a regular file in place of the link", li, err)
	}
	if n := strings.Count(log.String(), "was a symbolic link"); n != 1 || !strings.Contains(log.String(), "target="+theirs) {
		t.Errorf("the log says the link was replaced %d times, want once with its target:\n%s", n, log.String())
	}
	var sp savedPair
	if b, err := os.ReadFile(file); err != nil || json.Unmarshal(b, &sp) != nil || sp.Key.Engine != key.Engine {
		t.Errorf("the state file in the link's place holds %q (%v), want the saved state", b, err)
	}
}

// The shell resumes a saved state only when control.Resume takes it: one
// that holds nothing learnt is no "resuming" line and no resumed status,
// and one with a time to come or a negative count is refused with a
// warning naming the file and the field. Before, all four were resumed.
func TestControlLoadResumesOnlyWhatWasLearnt(t *testing.T) {
	key := adapt.CacheKey{Engine: "sim", GPU: "none", Capability: "12.1"}
	c := control.New(control.Config{Default: schedule.Flat(4, "engine default")})
	learnt := func() savedPair {
		p := c.Init(control.Pair{}).Pair
		p.Schedule[0].Width, p.Schedule[0].Source = 8, "measured"
		return savedPair{Key: key, Saved: time.Now().Add(-time.Hour), Pair: p}
	}
	year9999 := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		edit func(sp *savedPair)
		warn string // in the warning; "" none
		take bool
	}{
		{"a learnt state", func(sp *savedPair) {}, "", true},
		{`"pair": null`, func(sp *savedPair) { sp.Pair = control.Pair{} }, "", false},
		{`"saved" in year 9999`, func(sp *savedPair) { sp.Saved = year9999 }, "saved 9999-12-31T00:00:00Z is later than now", false},
		{"a width tried in year 9999", func(sp *savedPair) { sp.Pair.Buckets[0].Tried = map[int]time.Time{4: year9999} }, "Tried of width 4 9999", false},
		{`"Decisions": -1`, func(sp *savedPair) { sp.Pair.Decisions = -1 }, "Decisions -1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := learnt()
			tc.edit(&sp)
			file := filepath.Join(t.TempDir(), "adapt-control-x.json")
			b, err := json.Marshal(sp)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, b, 0o600); err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			sh := &controlShell{c: c, file: file, key: key, log: slog.New(slog.NewTextHandler(&log, nil))}
			sh.load()
			took := sh.resumed != ""
			if took != tc.take || strings.Contains(log.String(), "resuming what an earlier run learnt") != tc.take {
				t.Errorf("resumed %q, want it taken %v; log:\n%s", sh.resumed, tc.take, log.String())
			}
			warned := strings.Contains(log.String(), "level=WARN")
			if warned != (tc.warn != "") || !strings.Contains(log.String(), tc.warn) || warned && !strings.Contains(log.String(), "file="+file) {
				t.Errorf("the log, want a warning naming the file and %q (none when empty):\n%s", tc.warn, log.String())
			}
		})
	}
}

// The saved state is keyed by the models' content, not their path or
// time: the same weights touched or mounted elsewhere resume it. Where a
// state saved for the same model paths is not resumed (here the target's
// content changed), the log says what changed: a new engine build or
// re-quantized weights started from nothing without a word.
func TestControlKeyIsContent(t *testing.T) {
	m := func(path, sum string, mtime int64) adapt.ModelFile {
		return adapt.ModelFile{Path: path, Size: 100, ModTime: mtime, SHA256: sum}
	}
	key := adapt.CacheKey{Engine: "sim", GPU: "none", Capability: "12.1", Models: []adapt.ModelFile{m("/m/t", "aa", 1), m("/m/d", "bb", 1)}}
	moved := key
	moved.Models = []adapt.ModelFile{m("/mnt/t", "aa", 2), m("/mnt/d", "bb", 3)}
	if moved.ID() != key.ID() {
		t.Error("the same content at another path and time is another key")
	}
	requant := key
	requant.Models = []adapt.ModelFile{m("/m/t", "cc", 2), m("/m/d", "bb", 1)}
	if requant.ID() == key.ID() {
		t.Fatal("other content is the same key")
	}
	dir := t.TempDir()
	saved := filepath.Join(dir, "adapt-control-"+key.ID()+".json")
	b, err := json.Marshal(savedPair{Key: key, Saved: time.Unix(1_700_000_000, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(saved, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	sh := &controlShell{c: control.New(control.Config{Default: schedule.Flat(4, "engine default")}), file: filepath.Join(dir, "adapt-control-"+requant.ID()+".json"), key: requant, log: slog.New(slog.NewTextHandler(&log, nil))}
	sh.load()
	if want := "not resumed: the content of /m/t changed since"; !strings.Contains(log.String(), want) {
		t.Errorf("log without %q:\n%s", want, log.String())
	}
	other := requant
	other.Models = []adapt.ModelFile{m("/x/t", "cc", 2), m("/x/d", "bb", 1)}
	log.Reset()
	sh.key, sh.file = other, filepath.Join(dir, "adapt-control-"+other.ID()+".json")
	if sh.load(); log.Len() != 0 {
		t.Errorf("a word about a state saved for other model paths:\n%s", log.String())
	}
}

// A probe before traffic cut because the engine's start ended (SIGINT
// during it) says so: it said "the engine serves" while serve stopped.
// One cut by its own bound still says the engine serves.
func TestProbeBeforeTrafficCutByTheStart(t *testing.T) {
	var log bytes.Buffer
	sh := &controlShell{c: control.New(control.Config{Default: schedule.Flat(4, "engine default")}), client: http.DefaultClient, log: slog.New(slog.NewTextHandler(&log, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sh.BeforeTraffic(ctx, adapt.Target{BaseURL: "http://127.0.0.1:1"}, true); err != nil {
		t.Fatal(err)
	}
	if l := log.String(); !strings.Contains(l, "the engine's start was called off") || strings.Contains(l, "the engine serves") {
		t.Errorf("log:\n%s", l)
	}
}

// A state saved for the same curve under another file name (the keying
// before content alone: path and time were part of it) is read, not
// dropped without a word; the newest such state wins.
func TestControlLoadReadsTheSameCurveUnderAnOlderName(t *testing.T) {
	key := adapt.CacheKey{Engine: "sim", GPU: "none", Capability: "12.1", Models: []adapt.ModelFile{{Path: "/m/t", Size: 100, SHA256: "aa"}}}
	flat := control.New(control.Config{Default: schedule.Flat(4, "engine default")})
	dir := t.TempDir()
	for i, w := range []int{6, 8} { // the second is the newer
		p := flat.Init(control.Pair{}).Pair
		p.Schedule[0].Width, p.Schedule[0].Source = w, "measured"
		b, err := json.Marshal(savedPair{Key: key, Saved: time.Now().Add(-time.Hour), Pair: p})
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, fmt.Sprintf("adapt-control-old%d.json", i))
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
		mod := time.Now().Add(time.Duration(i-2) * time.Minute)
		if err := os.Chtimes(name, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	// Newest of all: a state for the same paths under another engine,
	// which does not hide the same curve's.
	other := key
	other.Engine = "llama.cpp 1 (x)"
	write := func(name string, sp savedPair) {
		b, err := json.Marshal(sp)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("adapt-control-other.json", savedPair{Key: other, Saved: time.Now().Add(-time.Hour), Pair: flat.Init(control.Pair{}).Pair})
	var log bytes.Buffer
	sh := &controlShell{c: flat, file: filepath.Join(dir, "adapt-control-"+key.ID()+".json"), key: key, log: slog.New(slog.NewTextHandler(&log, nil))}
	got := sh.load()
	if len(got.Schedule) == 0 || got.Schedule[0].Width != 8 || !strings.Contains(log.String(), "adapt-control-old1.json") {
		t.Errorf("resumed %v, want the newer state's width 8; log:\n%s", got.Schedule, log.String())
	}
	// This key's own file holding nothing learnt (a run that measured
	// nothing saved it) does not hide it either.
	write("adapt-control-"+key.ID()+".json", savedPair{Key: key, Saved: time.Now(), Pair: flat.Init(control.Pair{}).Pair})
	log.Reset()
	if got := sh.load(); len(got.Schedule) == 0 || got.Schedule[0].Width != 8 {
		t.Errorf("with an empty state under this key: resumed %v, want width 8; log:\n%s", got.Schedule, log.String())
	}
}

// Past the newest otherStatesRead states nothing is read, and the log
// says so: a state for the same curve older than that was passed over
// without a word.
func TestControlLoadSaysWhatItDidNotRead(t *testing.T) {
	key := adapt.CacheKey{Engine: "sim", GPU: "none", Capability: "12.1", Models: []adapt.ModelFile{{Path: "/m/t", Size: 100, SHA256: "aa"}}}
	flat := control.New(control.Config{Default: schedule.Flat(4, "engine default")})
	dir := t.TempDir()
	for i := range otherStatesRead + 1 {
		k := key
		if i > 0 { // the oldest is the same curve; the newer ones other models
			k.Models = []adapt.ModelFile{{Path: fmt.Sprintf("/m/other%d", i), Size: 100, SHA256: "bb"}}
		}
		b, err := json.Marshal(savedPair{Key: k, Saved: time.Now().Add(-time.Hour), Pair: flat.Init(control.Pair{}).Pair})
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, fmt.Sprintf("adapt-control-s%03d.json", i))
		if err := os.WriteFile(name, b, 0o600); err != nil {
			t.Fatal(err)
		}
		mod := time.Now().Add(time.Duration(i-100) * time.Minute)
		if err := os.Chtimes(name, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	var log bytes.Buffer
	sh := &controlShell{c: flat, file: filepath.Join(dir, "adapt-control-"+key.ID()+".json"), key: key, log: slog.New(slog.NewTextHandler(&log, nil))}
	if got := sh.otherKey(); got != "" {
		t.Errorf("read %s, past the newest %d", got, otherStatesRead)
	}
	if want := fmt.Sprintf("newest %d of %d in the cache", otherStatesRead, otherStatesRead+1); !strings.Contains(log.String(), want) {
		t.Errorf("log does not say %q:\n%s", want, log.String())
	}
}

// The first save's line says what follows it: more saves as the loop
// learns, or, where the first is the one made as the loop stops, the next
// start's resume ("and again as it learns" was said at shutdown).
func TestFirstSaveLine(t *testing.T) {
	for _, c := range []struct {
		last         bool
		want, unsaid string
	}{
		{false, "adapt: what was learnt is saved (and again as it learns)", "next start"},
		{true, "adapt: what was learnt is saved; the next start on this model pair resumes it", "again"},
	} {
		var log bytes.Buffer
		ctl := control.New(control.Config{Default: schedule.Flat(4, "engine default")})
		sh := &controlShell{c: ctl, file: filepath.Join(t.TempDir(), "adapt-control-x.json"), log: slog.New(slog.NewTextHandler(&log, nil))}
		sh.save(ctl.Init(control.Pair{}), time.Now(), c.last)
		sh.save(ctl.Init(control.Pair{}), time.Now(), c.last)
		if got := log.String(); strings.Count(got, "what was learnt is saved") != 1 || !strings.Contains(got, c.want) || strings.Contains(got, c.unsaid) {
			t.Errorf("last %v: log %q, want one line %q", c.last, got, c.want)
		}
	}
}
