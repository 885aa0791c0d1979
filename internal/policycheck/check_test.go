package policycheck

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/evidence"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/record"
)

const recPath = "docs/benchmark_results/r.md"

var gb10 = key.Key{Engine: key.MLXCEL, Drafter: key.DFlash, Capability: key.Capability{Major: 12, Minor: 1}, Quant: key.QuantAffine}

func entry(id string, k key.Key, w int, origin string) policy.Entry {
	return policy.Entry{ID: id, Key: k, Width: w, Pin: "mlx 81ba1c6a", Record: "docs/r.md", Origin: origin}
}

func stats(min, max float64) record.Stats {
	return record.Stats{N: 3, Min: min, Median: (min + max) / 2, Max: max, Mean: (min + max) / 2}
}

// goodRecord backs goodEntry: width 4 beats classic (max 58.71) with
// disjoint ranges, 3 (the runner-up) too.
func goodRecord() record.Record {
	return record.Record{
		Schema:   record.Schema,
		Name:     "r",
		Complete: true,
		Key:      record.Key{Engine: "mlxcel", Drafter: "dflash", Capability: "12.1", Quant: "affine"},
		Engine:   record.Engine{Name: "mlxcel", Pin: "mlx 81ba1c6a"},
		Arms: []record.Arm{
			{Label: "classic", Kind: "classic", Status: record.StatusOK, Stats: record.Stats{N: 6, Min: 57.98, Median: 58.355, Max: 58.71, Mean: 58.365}},
			{Label: "default = 4", Kind: "default", Width: 4, Status: record.StatusOK, Stats: stats(67.22, 67.91), BeatsClassic: true},
			{Label: "width 3", Kind: "width", Width: 3, Status: record.StatusOK, Stats: stats(69.78, 70.72), BeatsClassic: true},
			{Label: "width 4", Kind: "width", Width: 4, Status: record.StatusOK, Stats: stats(68.04, 68.29), BeatsClassic: true},
			{Label: "width 5", Kind: "width", Width: 5, Status: record.StatusOK, Stats: stats(58.15, 58.54)},
		},
		Drift: record.Drift{First: stats(57.98, 58.38), Last: stats(58.31, 58.71), Overlap: true, Verdict: "overlap"},
	}
}

func goodEntry() policy.Entry {
	e := entry("gb10-affine-dflash", gb10, 4, "policy.toml:40")
	e.Record, e.RunnerUp = recPath, 3
	return e
}

// files is an in-memory repository for Check's readFile.
type files map[string][]byte

func (f files) read(p string) ([]byte, error) {
	if b, ok := f[p]; ok {
		return b, nil
	}
	return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
}

func repoWith(rec record.Record) files {
	b, err := json.Marshal(rec)
	if err != nil {
		panic(err)
	}
	return files{recPath: []byte("# record\n"), strings.TrimSuffix(recPath, ".md") + ".json": b}
}

func TestCheck(t *testing.T) {
	jsonPath := strings.TrimSuffix(recPath, ".md") + ".json"
	mod := func(f func(*record.Record)) files {
		r := goodRecord()
		f(&r)
		return repoWith(r)
	}
	cases := []struct {
		name     string
		entry    func(*policy.Entry)
		repo     files
		problems []string // substrings, one per expected problem
		notes    []string
	}{
		{name: "good", repo: repoWith(goodRecord()),
			notes: []string{"classic range 57.98–58.71 tok/s over 6 runs, both brackets (ceiling 58.71)", "the record keeps no raw runs", "speclaunch bench writes a record with them"}},
		{name: "missing md", repo: func() files { f := repoWith(goodRecord()); delete(f, recPath); return f }(),
			problems: []string{"record docs/benchmark_results/r.md: missing"}},
		{name: "missing json", repo: files{recPath: []byte("# r")},
			problems: []string{"record twin docs/benchmark_results/r.json: missing"}},
		{name: "missing both", repo: files{},
			problems: []string{"r.md: missing", "r.json: missing"}},
		{name: "bad json", repo: files{recPath: []byte("# r"), jsonPath: []byte("{not json")},
			problems: []string{"r.json: (top level): is not valid JSON at byte 2"}},
		{name: "json of wrong shape", repo: files{recPath: []byte("# r"), jsonPath: []byte(`{"schema": "one"}`)},
			problems: []string{"r.json: schema: is string, want a whole number in range"}},
		{name: "record schema 2", repo: mod(func(r *record.Record) { r.Schema = 2 }),
			problems: []string{"r.json: schema: is 2; this speclaunch reads record schema 1"}},
		{name: "record schema missing", repo: mod(func(r *record.Record) { r.Schema = 0 }),
			problems: []string{"schema: is 0"}},
		{name: "record null", repo: files{recPath: []byte("# r"), jsonPath: []byte("null")},
			problems: []string{"r.json: (top level): a record is a JSON object"}},
		{name: "record empty object", repo: files{recPath: []byte("# r"), jsonPath: []byte("{}")},
			problems: []string{"r.json: schema: is 0"}},
		{name: "record width out of range", repo: mod(func(r *record.Record) { r.Arms[3].Width = 1_000_000_000 }),
			problems: []string{"r.json: arms[3].width: 1000000000 is outside 2 to 256"}},
		{name: "key mismatch", repo: mod(func(r *record.Record) { r.Key.Capability = "9.0"; r.Key.Quant = "nvfp4" }),
			problems: []string{`record capability "9.0" vs 12.1, quant "nvfp4" vs affine`}},
		{name: "key in other spellings still matches", repo: mod(func(r *record.Record) { r.Key.Capability = "sm_121"; r.Key.Engine = "mlxcel-server" })},
		{name: "key unparseable", repo: mod(func(r *record.Record) { r.Key.Drafter = "" }),
			problems: []string{`r.json: key.drafter: is empty`}},
		{name: "width not measured", entry: func(e *policy.Entry) { e.Width = 6 }, repo: repoWith(goodRecord()),
			problems: []string{"width 6 has no measured arm in the record (measured widths: 3, 4, 5)"}},
		{name: "width not beating classic", entry: func(e *policy.Entry) { e.Width, e.RunnerUp = 5, 4 }, repo: repoWith(goodRecord()),
			problems: []string{`width 5 (arm "width 5") does not beat classic with disjoint ranges: its min 58.15 is not above classic's max 58.71`}},
		{name: "margin boundary: min equal to classic's max", entry: func(e *policy.Entry) { e.Width, e.RunnerUp = 5, 4 }, repo: mod(func(r *record.Record) { r.Arms[4].Stats = stats(58.71, 59.5) }),
			problems: []string{`its min 58.71 is not above classic's max 58.71`}},
		{name: "flag true on a width that does not beat classic", entry: func(e *policy.Entry) { e.Width, e.RunnerUp = 5, 4 }, repo: mod(func(r *record.Record) { r.Arms[4].BeatsClassic = true }),
			problems: []string{`arm "width 5": stored beats_classic true disagrees`, `width 5 (arm "width 5") does not beat classic`}},
		{name: "flag false though ranges disjoint", repo: mod(func(r *record.Record) { r.Arms[3].BeatsClassic = false }),
			problems: []string{`arm "width 4": stored beats_classic false disagrees with the margin applied to its figures (true)`}},
		{name: "a bracket above classic's stored range", repo: mod(func(r *record.Record) {
			r.Arms[0].Stats = record.Stats{N: 6, Min: 57.0, Median: 58, Max: 58.5, Mean: 58}
			r.Drift.Last = stats(58.0, 67.5)
		}), problems: []string{`classic: stored drift.last 58.00–67.50 outside classic's stored range 57.00–58.50 disagree(s) with classic's own stats`}},
		{name: "the width's representative is judged: the explicit width arm", repo: mod(func(r *record.Record) {
			r.Arms[1].Stats, r.Arms[1].BeatsClassic = stats(58.0, 60.0), false
		})},
		{name: "width only not-a-measurement", repo: mod(func(r *record.Record) {
			r.Arms = append(r.Arms[:1], r.Arms[2])
			r.Arms = append(r.Arms, record.Arm{Label: "width 4", Kind: "width", Width: 4, Status: record.StatusNotMeasurement, StatusReason: "speculation declined", Stats: stats(68, 69)})
		}), problems: []string{"width 4 has no measured arm"}, notes: []string{`arm "width 4" at width 4 is not-a-measurement (speculation declined): not ranked`}},
		{name: "width failed", repo: mod(func(r *record.Record) {
			for _, i := range []int{1, 3} {
				r.Arms[i].Status, r.Arms[i].BeatsClassic = record.StatusFailed, false
			}
		}),
			problems: []string{"width 4 has no measured arm"}},
		{name: "width arm under the floor", repo: mod(func(r *record.Record) { r.Arms[3].Stats.N, r.Arms[3].BeatsClassic = 2, false }),
			problems: []string{`width 4 (arm "width 4") does not beat classic with disjoint ranges: n = 2; the floor is 3 runs`}},
		{name: "no classic arm", repo: mod(func(r *record.Record) { r.Arms = r.Arms[1:]; r.Drift = record.Drift{} }),
			problems: []string{"no classic arm that measured"}},
		{name: "classic arm failed", repo: mod(func(r *record.Record) { r.Arms[0].Status = record.StatusFailed }),
			problems: []string{"no classic arm that measured"}},
		{name: "simulated", repo: mod(func(r *record.Record) { r.Simulated = true }),
			problems: []string{"record is simulated"}},
		{name: "pin mismatch", repo: mod(func(r *record.Record) { r.Engine.Pin = "mlx 0000000" }),
			problems: []string{`pin mismatch: the entry pins "mlx 81ba1c6a" but the record measured "mlx 0000000"`}},
		{name: "incomplete", repo: mod(func(r *record.Record) { r.Complete = false }),
			problems: []string{"record is incomplete"}},
		{name: "transcribed without source", repo: mod(func(r *record.Record) { r.Transcribed = &record.Transcription{Source: " ", Date: "2026-09-20"} }),
			problems: []string{"transcribed but names no source"}},
		{name: "transcribed with source", repo: mod(func(r *record.Record) {
			r.Transcribed = &record.Transcription{Source: "lablup/mlxcel docs/x.md", Date: "2026-09-20"}
		}), notes: []string{"figures transcribed from lablup/mlxcel docs/x.md (2026-09-20), not measured by speclaunch"}},
		{name: "runner-up not measured", entry: func(e *policy.Entry) { e.RunnerUp = 7 }, repo: repoWith(goodRecord()),
			problems: []string{"runner_up 7 has no measured arm"}},
		{name: "runner-up not beating classic is a note", entry: func(e *policy.Entry) { e.RunnerUp = 5 }, repo: repoWith(goodRecord()),
			notes: []string{"runner-up width 5 does not beat classic"}},
		{name: "drift is a note", repo: mod(func(r *record.Record) { r.Drift.Overlap = false; r.Drift.Verdict = "0.5% drift" }),
			notes: []string{"classic brackets do not overlap: the host drifted during the run (0.5% drift)"}},
		{name: "several problems at once", repo: mod(func(r *record.Record) { r.Simulated = true; r.Complete = false; r.Engine.Pin = "x" }),
			problems: []string{"simulated", "incomplete", "pin mismatch"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := goodEntry()
			if tc.entry != nil {
				tc.entry(&e)
			}
			vs := check(t, &policy.Policy{Entries: []policy.Entry{e}}, tc.repo.read)
			if len(vs) != 1 {
				t.Fatalf("verdicts = %+v", vs)
			}
			v := vs[0]
			if v.EntryID != e.ID || v.OK != (len(tc.problems) == 0) {
				t.Errorf("verdict %+v, want OK=%v", v, len(tc.problems) == 0)
			}
			if len(v.Problems) != len(tc.problems) {
				t.Errorf("problems = %q, want %d matching %q", v.Problems, len(tc.problems), tc.problems)
			}
			for _, want := range tc.problems {
				if !containsSub(v.Problems, want) {
					t.Errorf("no problem contains %q: %q", want, v.Problems)
				}
			}
			for _, want := range tc.notes {
				if !containsSub(v.Notes, want) {
					t.Errorf("no note contains %q: %q", want, v.Notes)
				}
			}
		})
	}
}

func containsSub(ss []string, sub string) bool {
	for _, s := range ss {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestCheckEveryEntryAndNil(t *testing.T) {
	bad := goodEntry()
	bad.ID, bad.Record = "other", "docs/missing.md"
	vs := check(t, &policy.Policy{Entries: []policy.Entry{goodEntry(), bad}}, repoWith(goodRecord()).read)
	if len(vs) != 2 || !vs[0].OK || vs[1].OK || vs[1].EntryID != "other" {
		t.Errorf("verdicts = %+v", vs)
	}
	if vs := check(t, nil, repoWith(goodRecord()).read); len(vs) != 0 {
		t.Errorf("nil policy: %+v", vs)
	}
}

// TestShippedPolicyChecks runs `policy check` on the embedded policy.toml
// against the records committed in this repository: CI fails when an entry
// loses its backing.
func TestShippedPolicyChecks(t *testing.T) {
	f := shipped(t)
	vs := check(t, policy.Merge(f), func(p string) ([]byte, error) { return os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(p))) })
	if len(vs) == 0 {
		t.Fatal("no verdicts")
	}
	for _, v := range vs {
		if !v.OK {
			t.Errorf("entry %s: %q", v.EntryID, v.Problems)
		}
		for _, n := range v.Notes {
			t.Logf("entry %s: note: %s", v.EntryID, n)
		}
	}
}

func TestCheckUnreadable(t *testing.T) {
	denied := func(p string) ([]byte, error) { return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrPermission} }
	v := check(t, &policy.Policy{Entries: []policy.Entry{goodEntry()}}, denied)[0]
	if v.OK || len(v.Problems) != 2 || !strings.Contains(v.Problems[0], "cannot be read: open docs/benchmark_results/r.md: permission denied") {
		t.Errorf("verdict = %+v", v)
	}
}

// strictRecord is a record made under the bootstrap rule: raw runs for the
// default arm (the engine's own width 3) and width 4, and method.bootstrap.
func strictRecord(w4, def []float64) record.Record {
	r := goodRecord()
	r.Method.Bootstrap = &record.BootstrapMethod{Resamples: 4000, Seed: 1, Units: "rounds"}
	// runs whose cost is ms per cycle: 100 cycles of predicted_ms ms
	runs := func(xs []float64, ms float64) []record.Run {
		var out []record.Run
		for i, x := range xs {
			out = append(out, record.Run{Round: i + 1, Phase: "measured", TokPerS: x, WallS: 200 / x, CompletionTokens: 200, Cycles: 100, PredictedMS: 100 * ms})
		}
		return out
	}
	r.Arms[1] = record.Arm{Label: "default = 3", Kind: "default", Width: 3, Status: record.StatusOK, Runs: runs(def, 20.5), BeatsClassic: true}
	r.Arms[2].Width, r.Arms[2].Label = 2, "width 2" // keep one arm per width
	r.Arms[3].Runs = runs(w4, 22.25)
	for _, i := range []int{1, 3} {
		a := &r.Arms[i]
		a.Stats, a.Cost = evidence.Describe(evidence.Rates(a)), evidence.ArmCost(a)
	}
	r.Arms[0].Cost.MSPerCycle = 17.1
	return r
}

func TestCheckStrictRecordsAndCost(t *testing.T) {
	const second = "docs/benchmark_results/r2.md"
	sure := strictRecord([]float64{68.04, 68.1, 68.2, 68.29, 68.15}, []float64{63, 63.5, 64, 63.2, 63.8})
	noisy := strictRecord([]float64{68.04, 62, 68.2, 61, 68.15}, []float64{63, 68.3, 62, 68.6, 63.8})
	legacy := noisy
	legacy.Method.Bootstrap = nil
	repo := func(a, b record.Record) files {
		f := repoWith(a)
		js, _ := json.Marshal(b)
		f[second], f["docs/benchmark_results/r2.json"] = []byte("# r2"), js
		return f
	}
	both := func(e *policy.Entry) { e.Records = []string{recPath, second} }
	cost := func(ms float64) func(*policy.Entry) {
		return func(e *policy.Entry) {
			both(e)
			e.Cost = []policy.CostRow{{Record: second, ClassicMS: 17.1, Widths: []int{3, 4}, MS: []float64{20.5, ms}}}
		}
	}
	for _, tc := range []struct {
		name     string
		entry    func(*policy.Entry)
		repo     files
		problems []string
		notes    []string
	}{
		{name: "both records pass", entry: both, repo: repo(sure, sure),
			notes: []string{"r2.md: width 4 beats the default (width 3) with probability 1.000"}},
		{name: "the second record fails", entry: both, repo: repo(sure, noisy),
			problems: []string{"docs/benchmark_results/r2.md: width 4 beats the default (width 3) with probability"}},
		{name: "a record that predates the rule: a note", entry: both, repo: repo(sure, legacy),
			notes: []string{"r2.md: the record predates the rule that an entry beats the engine's default with probability >= 0.95"}},
		{name: "the second record measured another key", entry: both, repo: repo(sure, func() record.Record { r := sure; r.Key.Quant = "nvfp4"; return r }()),
			problems: []string{`docs/benchmark_results/r2.md: record measures a different key than the entry: record quant "nvfp4" vs affine`}},
		{name: "cost table matches", entry: cost(22.25), repo: repo(sure, sure)},
		{name: "cost table off", entry: cost(21.5), repo: repo(sure, sure),
			problems: []string{"r2.md: cost table: width 4 is 21.50 ms per cycle in the entry but 22.25 in the record"}},
		{name: "stored comparison disagrees", entry: both, repo: repo(sure, func() record.Record {
			r := sure
			r.Arms = append([]record.Arm(nil), sure.Arms...)
			r.Arms[3].VsDefault = &record.Comparison{PBetter: 0.5}
			return r
		}()), problems: []string{`r2.md: arm "width 4": stored vs_default.ratio 0 (recomputed 1.073), vs_default.lo 0 (recomputed 1.066)`}},
		{name: "a run edited under its stats", entry: both, repo: repo(sure, func() record.Record {
			r := sure
			r.Arms = append([]record.Arm(nil), sure.Arms...)
			r.Arms[3].Runs = append([]record.Run(nil), sure.Arms[3].Runs...)
			r.Arms[3].Runs[0].TokPerS, r.Arms[3].Runs[0].WallS = 58.0, 200/58.0 // its raw figures edited too
			return r
		}()), problems: []string{`r2.md: arm "width 4": stored stats.min 68.04 (recomputed 58), stats.mean 68.16 (recomputed 66.15) disagree(s) with its raw runs`,
			`r2.md: arm "width 4": stored beats_classic true disagrees with the margin applied to its figures (false)`,
			`r2.md: width 4 (arm "width 4") does not beat classic with disjoint ranges: its min 58.00 is not above classic's max 58.71`,
			`r2.md: width 4 beats the default (width 3) with probability 0.940, below 0.95`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := goodEntry()
			tc.entry(&e)
			v := check(t, &policy.Policy{Entries: []policy.Entry{e}}, tc.repo.read)[0]
			if len(v.Problems) != len(tc.problems) {
				t.Fatalf("problems %q, want %q", v.Problems, tc.problems)
			}
			for i, want := range tc.problems {
				if !strings.Contains(v.Problems[i], want) {
					t.Errorf("problem %q lacks %q", v.Problems[i], want)
				}
			}
			for _, want := range tc.notes {
				if !slices.ContainsFunc(v.Notes, func(n string) bool { return strings.Contains(n, want) }) {
					t.Errorf("notes %q lack %q", v.Notes, want)
				}
			}
		})
	}
}

// check runs Check with a live context; the context's error is the only one.
func check(t *testing.T, p *policy.Policy, read func(string) ([]byte, error)) []Verdict {
	t.Helper()
	vs, err := Check(context.Background(), p, func(path string, _ bool) ([]byte, error) { return read(path) })
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// shipped is the embedded policy.toml, parsed.
func shipped(tb testing.TB) *policy.File {
	tb.Helper()
	data, err := os.ReadFile("../../policy.toml")
	if err != nil {
		tb.Fatal(err)
	}
	f, err := policy.Parse("policy.toml", data)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}
