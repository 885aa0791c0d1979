package policy

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/record"
)

const recPath = "docs/benchmark_results/r.md"

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
			{Label: "classic", Kind: "classic", Status: record.StatusOK, Stats: stats(57.98, 58.71)},
			{Label: "default = 4", Kind: "default", Width: 4, Status: record.StatusOK, Stats: stats(67.22, 67.91), BeatsClassic: true},
			{Label: "width 3", Kind: "width", Width: 3, Status: record.StatusOK, Stats: stats(69.78, 70.72), BeatsClassic: true},
			{Label: "width 4", Kind: "width", Width: 4, Status: record.StatusOK, Stats: stats(68.04, 68.29), BeatsClassic: true},
			{Label: "width 5", Kind: "width", Width: 5, Status: record.StatusOK, Stats: stats(58.15, 58.54)},
		},
		Drift: record.Drift{First: stats(57.98, 58.38), Last: stats(58.31, 58.71), Overlap: true, Verdict: "overlap"},
	}
}

func goodEntry() Entry {
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
		entry    func(*Entry)
		repo     files
		problems []string // substrings, one per expected problem
		notes    []string
	}{
		{name: "good", repo: repoWith(goodRecord()),
			notes: []string{"classic range ceiling 58.71 tok/s"}},
		{name: "missing md", repo: func() files { f := repoWith(goodRecord()); delete(f, recPath); return f }(),
			problems: []string{"record docs/benchmark_results/r.md: missing"}},
		{name: "missing json", repo: files{recPath: []byte("# r")},
			problems: []string{"record twin docs/benchmark_results/r.json: missing"}},
		{name: "missing both", repo: files{},
			problems: []string{"r.md: missing", "r.json: missing"}},
		{name: "bad json", repo: files{recPath: []byte("# r"), jsonPath: []byte("{not json")},
			problems: []string{"does not parse as a record"}},
		{name: "json of wrong shape", repo: files{recPath: []byte("# r"), jsonPath: []byte(`{"schema": "one"}`)},
			problems: []string{"does not parse as a record"}},
		{name: "record schema 2", repo: mod(func(r *record.Record) { r.Schema = 2 }),
			problems: []string{"has schema 2"}},
		{name: "record schema missing", repo: mod(func(r *record.Record) { r.Schema = 0 }),
			problems: []string{"has schema 0"}},
		{name: "key mismatch", repo: mod(func(r *record.Record) { r.Key.Capability = "9.0"; r.Key.Quant = "nvfp4" }),
			problems: []string{`record capability "9.0" vs 12.1, quant "nvfp4" vs affine`}},
		{name: "key in other spellings still matches", repo: mod(func(r *record.Record) { r.Key.Capability = "sm_121"; r.Key.Engine = "mlxcel-server" })},
		{name: "key unparseable", repo: mod(func(r *record.Record) { r.Key.Drafter = "" }),
			problems: []string{`drafter "" vs dflash`}},
		{name: "width not measured", entry: func(e *Entry) { e.Width = 6 }, repo: repoWith(goodRecord()),
			problems: []string{"width 6 has no measured arm in the record (measured widths: 3, 4, 5)"}},
		{name: "width not beating classic", entry: func(e *Entry) { e.Width, e.RunnerUp = 5, 4 }, repo: mod(func(r *record.Record) { r.Arms[4].BeatsClassic = true }),
			problems: []string{`arm "width 5" at width 5 does not beat classic with disjoint ranges: its min 58.15 is not above classic's max 58.71`}},
		{name: "flag false though ranges disjoint", repo: mod(func(r *record.Record) { r.Arms[3].BeatsClassic = false }),
			problems: []string{`arm "width 4" at width 4 is not marked beats_classic`}},
		{name: "flag true but ranges overlap the closing bracket only", repo: mod(func(r *record.Record) {
			r.Arms[0].Stats = stats(57.0, 58.0)
			r.Drift.Last = stats(58.0, 67.5)
		}), problems: []string{`arm "default = 4" at width 4 does not beat classic with disjoint ranges: its min 67.22 is not above classic's max 67.50`}},
		{name: "every arm at the width must beat classic", repo: mod(func(r *record.Record) { r.Arms[1].Stats = stats(58.0, 60.0) }),
			problems: []string{`arm "default = 4" at width 4 does not beat classic`}},
		{name: "width only not-a-measurement", repo: mod(func(r *record.Record) {
			r.Arms = append(r.Arms[:1], r.Arms[2])
			r.Arms = append(r.Arms, record.Arm{Label: "width 4", Kind: "width", Width: 4, Status: record.StatusNotMeasurement, StatusReason: "speculation declined", Stats: stats(68, 69), BeatsClassic: true})
		}), problems: []string{"width 4 has no measured arm"}, notes: []string{`arm "width 4" at width 4 is not-a-measurement (speculation declined): not ranked`}},
		{name: "width failed", repo: mod(func(r *record.Record) { r.Arms[1].Status = record.StatusFailed; r.Arms[3].Status = record.StatusFailed }),
			problems: []string{"width 4 has no measured arm"}},
		{name: "width arm under the floor", repo: mod(func(r *record.Record) { r.Arms[3].Stats.N = 2 }),
			problems: []string{`arm "width 4" at width 4 has n = 2; the floor is 3 runs`}},
		{name: "no classic arm", repo: mod(func(r *record.Record) { r.Arms = r.Arms[1:]; r.Drift = record.Drift{} }),
			problems: []string{"no classic arm that ran"}},
		{name: "classic arm failed, brackets still count", repo: mod(func(r *record.Record) { r.Arms[0].Status = record.StatusFailed }),
			notes: []string{"classic range ceiling 58.71 tok/s, from the opening classic bracket, the closing classic bracket"}},
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
		{name: "runner-up not measured", entry: func(e *Entry) { e.RunnerUp = 7 }, repo: repoWith(goodRecord()),
			problems: []string{"runner_up 7 has no measured arm"}},
		{name: "runner-up not beating classic is a note", entry: func(e *Entry) { e.RunnerUp = 5 }, repo: repoWith(goodRecord()),
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
			vs := Check(&Policy{Entries: []Entry{e}}, tc.repo.read)
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
	vs := Check(&Policy{Entries: []Entry{goodEntry(), bad}}, repoWith(goodRecord()).read)
	if len(vs) != 2 || !vs[0].OK || vs[1].OK || vs[1].EntryID != "other" {
		t.Errorf("verdicts = %+v", vs)
	}
	if vs := Check(nil, repoWith(goodRecord()).read); len(vs) != 0 {
		t.Errorf("nil policy: %+v", vs)
	}
}

// TestShippedPolicyChecks runs `policy check` on the embedded policy.toml
// against the records committed in this repository: CI fails when an entry
// loses its backing.
func TestShippedPolicyChecks(t *testing.T) {
	f := shipped(t)
	vs := Check(Merge(f), func(p string) ([]byte, error) { return os.ReadFile(filepath.Join("..", filepath.FromSlash(p))) })
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
	v := Check(&Policy{Entries: []Entry{goodEntry()}}, denied)[0]
	if v.OK || len(v.Problems) != 2 || !strings.Contains(v.Problems[0], "cannot be read: open docs/benchmark_results/r.md: permission denied") {
		t.Errorf("verdict = %+v", v)
	}
}
