package policy

import (
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/schedule"
)

func tunedEntry(id, target string) Entry {
	s, _ := schedule.FromTriples([][]int{{1, 3, 6}, {4, 0, 1}}, "measured")
	return Entry{ID: id, Key: gb10, Width: 6, Schedule: s, Pin: "sim", Record: "records/tune.md", Tuned: "2026-12-05",
		Pair: Pair{Target: strings.Repeat(target, 64), Draft: strings.Repeat("b", 64), Pin: "sim"}}
}

// A tuned layer renders to a file Parse reads back entry for entry; a
// re-run replaces its pair's entry and keeps the others.
func TestTunedRoundTrip(t *testing.T) {
	es := WithTuned(nil, tunedEntry("tuned-a", "a"))
	es = WithTuned(es, tunedEntry("tuned-c", "c"))
	again := tunedEntry("tuned-a2", "a")
	again.Schedule[0].Width = 5
	es = WithTuned(es, again)
	if len(es) != 2 || es[0].ID != "tuned-a2" || es[1].ID != "tuned-c" {
		t.Fatalf("entries after a re-run: %+v", es)
	}
	f, err := Parse("tuned.toml", RenderTuned(es))
	if err != nil {
		t.Fatalf("the rendered layer does not parse: %v\n%s", err, RenderTuned(es))
	}
	if len(f.Entries) != 2 || f.Entries[0].Pair != es[0].Pair || f.Entries[0].Tuned != "2026-12-05" || f.Entries[0].Sched().String() != "1-3:5,4+:1" {
		t.Errorf("read back %+v", f.Entries)
	}
}

// A tuned entry answers only its pair: it never replaces the measured
// entry of its key, which still answers every other pair.
func TestLookupPair(t *testing.T) {
	measured := entry("gb10-affine-dflash", gb10, 4, "policy.toml:40")
	tuned := tunedEntry("tuned-a", "a")
	tuned.Origin = "/home/op/.config/speclaunch/tuned.toml:11"
	p := Merge(&File{Name: "policy.toml", Entries: []Entry{measured}}, &File{Name: "tuned.toml", Entries: []Entry{tuned}})
	if len(p.Entries) != 2 || len(p.Replaced) != 0 {
		t.Fatalf("merged %d entries, replaced %d", len(p.Entries), len(p.Replaced))
	}
	if e := p.Lookup(gb10); e == nil || e.ID != measured.ID {
		t.Errorf("Lookup = %v, want the measured entry", e)
	}
	if e := p.LookupPair(gb10, tuned.Pair); e == nil || e.ID != tuned.ID {
		t.Errorf("LookupPair = %v, want the tuned entry", e)
	}
	other := tuned.Pair
	other.Pin = "llama.cpp d32676d"
	if e := p.LookupPair(gb10, other); e != nil {
		t.Errorf("another engine build matched %s", e.ID)
	}
	lines := strings.Join(p.ExplainPair(gb10, tuned.Pair), "\n")
	if !strings.Contains(lines, "tuned entry tuned-a matches this pair") || !strings.Contains(lines, "tuned 2026-12-05") || !strings.Contains(lines, "record /home/op/.config/speclaunch/records/tune.md") {
		t.Errorf("explain:\n%s", lines)
	}
	if lines := strings.Join(p.ExplainPair(gb10, other), "\n"); !strings.Contains(lines, "is for another pair") {
		t.Errorf("explain for another pair:\n%s", lines)
	}
}

// policy explain says what a tuned entry rests on as resolve's headline
// does: one tuned on the sim is simulated, never a measurement; one tuned
// on a real engine was measured on these very models. Explain said
// "measured on these very models" under a headline saying "simulated".
func TestExplainPairSaysSimulated(t *testing.T) {
	real := tunedEntry("tuned-b", "b")
	real.Pin, real.Pair.Pin = "llama.cpp d32676d", "llama.cpp d32676d"
	for _, tc := range []struct {
		name      string
		entry     Entry
		want, not string
	}{
		{"tuned on the sim", tunedEntry("tuned-a", "a"), "tune ran these very models on the sim engine (simulated, never a measurement)", "measured on"},
		{"tuned on a real engine", real, "it was measured on these very models", "simulated"},
	} {
		p := Merge(&File{Name: "tuned.toml", Entries: []Entry{tc.entry}})
		lines := strings.Join(p.ExplainPair(gb10, tc.entry.Pair), "\n")
		if !strings.Contains(lines, tc.want) || strings.Contains(lines, tc.not) {
			t.Errorf("%s: explain:\n%s\nwant %q, without %q", tc.name, lines, tc.want, tc.not)
		}
	}
}

func TestTunedPairErrors(t *testing.T) {
	for _, tc := range []struct{ add, want string }{
		{`target_sha256 = "` + strings.Repeat("a", 64) + `"`, "give target_sha256 and draft_sha256"},
		{`target_sha256 = "xyz"` + "\n" + `draft_sha256 = "` + strings.Repeat("a", 64) + `"`, "is not 64 lowercase hex digits"},
	} {
		src := "schema = 1\n[[entry]]\nid = \"t\"\nengine = \"mlxcel\"\ndrafter = \"dflash\"\ncapability = \"12.1\"\nquant = \"affine\"\nwidth = 4\npin = \"sim\"\nrecord = \"r.md\"\n" + tc.add + "\n"
		if _, err := Parse("tuned.toml", []byte(src)); err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "tuned.toml:") {
			t.Errorf("%s: err %v, want %q at a line", tc.add, err, tc.want)
		}
	}
}

// A tuned entry's record is found beside its layer, wherever the layer
// was named from; a measured entry's stays repository-relative. resolve,
// policy explain (RecordPath) and policy check (RecordFile) read one rule.
func TestRecordPath(t *testing.T) {
	tuned := func(origin string) Entry {
		e := tunedEntry("tuned-a", "a")
		e.Origin = origin
		return e
	}
	for _, tc := range []struct {
		name   string
		entry  Entry
		want   string
		beside bool
	}{
		{"tuned, an absolute layer", tuned("/home/u/.config/speclaunch/tuned.toml:11"), "/home/u/.config/speclaunch/records/tune.md", true},
		{"tuned, a relative layer", tuned("sub/tuned.toml:3"), "sub/records/tune.md", true},
		{"tuned, no origin", tuned(""), "records/tune.md", true},
		{"measured", entry("gb10-affine-dflash", gb10, 4, "policy.toml:40"), "docs/r.md", false},
	} {
		if got := tc.entry.RecordPath(); got != tc.want {
			t.Errorf("%s: RecordPath %s, want %s", tc.name, got, tc.want)
		}
		if got, beside := tc.entry.RecordFile(tc.entry.Record); got != tc.want || beside != tc.beside {
			t.Errorf("%s: RecordFile %s, %v; want %s, %v", tc.name, got, beside, tc.want, tc.beside)
		}
	}
}

// An entry is simulated when tune on the sim wrote it: keyed to a pair
// and pinned to the sim. A measured entry pinned "sim" (which policy
// check refuses) and a pair tuned on a real engine are not.
func TestEntrySimulated(t *testing.T) {
	sim := tunedEntry("tuned-a", "a")
	real := tunedEntry("tuned-b", "b")
	real.Pin, real.Pair.Pin = "llama.cpp d32676d", "llama.cpp d32676d"
	measured := sim
	measured.Pair, measured.Tuned = Pair{}, ""
	for _, tc := range []struct {
		name string
		e    Entry
		want bool
	}{{"tuned on the sim", sim, true}, {"tuned on llama.cpp", real, false}, {"a measured entry pinned sim", measured, false}} {
		if got := tc.e.Simulated(); got != tc.want {
			t.Errorf("%s: Simulated() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
