package policycheck

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/evidence"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/record"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// sweepArm is an arm of one level whose three engines ran the windows
// around the given rates.
func sweepArm(kind string, w int, rates ...float64) record.Arm {
	a := record.Arm{Label: kind, Kind: kind, Width: w, Status: record.StatusOK}
	if kind == record.KindWidth {
		a.Label = "width"
	}
	for e, x := range rates {
		for _, d := range []float64{0, 0.5, -0.5} {
			a.Runs = append(a.Runs, record.Run{Round: e + 1, Phase: record.PhaseMeasured, TokPerS: x + d, WallS: 200 / (x + d), CompletionTokens: 200})
		}
	}
	a.Stats = evidence.Describe(evidence.Rates(&a))
	return a
}

// sweepRecord earns 1-3:6,4+:1: width 6 sure over the default (4) at one
// client, classic sure over it at four. Its stored figures are the rule's.
func sweepRecord(t *testing.T) record.Record {
	return sweepRecordOf(t, []record.Level{
		{Concurrency: 1, Arms: []record.Arm{sweepArm("classic", 0, 80, 81, 79), sweepArm("default", 4, 100, 101, 99), sweepArm("width", 6, 120, 121, 119)}},
		{Concurrency: 4, Arms: []record.Arm{sweepArm("classic", 0, 200, 201, 199), sweepArm("default", 4, 150, 151, 149), sweepArm("width", 6, 120, 121, 119)}},
	})
}

// sweepRecordOf is a load sweep of levels whose stored figures are the
// rule's.
func sweepRecordOf(t *testing.T, levels []record.Level) record.Record {
	rec := goodRecord()
	rec.Arms, rec.Drift = nil, record.Drift{}
	rec.Method.Bootstrap = evidence.Method()
	rec.Levels = levels
	sp, vs, earned, err := evidence.Earn(context.Background(), &rec)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rec.Levels {
		rec.Levels[i].Spread, rec.Levels[i].Bucket = sp[i], vs[i]
		ev := evidence.Of(rec.AtLevel(i))
		for j := range ev.Arms {
			ev.Arms[j].Arm.BeatsClassic = ev.Arms[j].Kind != record.KindClassic && ev.BeatsClassic(&ev.Arms[j])
		}
	}
	rec.Earned = earned
	return rec
}

// A schedule entry is checked bucket by bucket against its load sweep: the
// record's schedule passes; another schedule, a simulated record, or an
// edited bucket fails.
func TestCheckScheduleEntry(t *testing.T) {
	withSched := func(text string) policy.Entry {
		e := goodEntry()
		e.RunnerUp = 0
		e.Schedule, _ = schedule.Parse(text, "measured")
		e.Width = e.Schedule.At(1).Width
		return e
	}
	for _, tc := range []struct {
		name  string
		entry policy.Entry
		edit  func(*record.Record)
		want  string // "" = ok
	}{
		{"the earned schedule", withSched("1-3:6,4+:1"), nil, ""},
		{"another schedule", withSched("1-3:6,4+:4"), nil, "is not the one the record's levels earn (1-3:6,4+:1)"},
		{"a simulated record", withSched("1-3:6,4+:1"), func(r *record.Record) { r.Simulated = true }, "the record is simulated"},
		{"an edited bucket", withSched("1-3:6,4+:1"), func(r *record.Record) { r.Levels[1].Bucket.Width = 4 }, "level 4: stored bucket width 4"},
		// What tune on the sim writes: an entry keyed by the engine the
		// sim resolves with (mlxcel), pinned "sim", on the sim's record.
		// tune's own suggestion (`policy check --policy tuned.toml`) failed
		// it on the engine and on the record's being simulated.
		{"a tuned entry of the sim on its record", simTuned(withSched("1-3:6,4+:1")), simRecord, ""},
		{"a tuned entry of mlxcel on a simulated record", tunedOn(withSched("1-3:6,4+:1"), "mlx 81ba1c6a"), func(r *record.Record) { r.Simulated = true }, "the record is simulated"},
		{"a measured entry pinned sim on the sim's record", pinnedSim(withSched("1-3:6,4+:1")), simRecord, `record engine "sim" vs mlxcel`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := sweepRecord(t)
			if tc.edit != nil {
				tc.edit(&rec)
			}
			vs := check(t, &policy.Policy{Entries: []policy.Entry{tc.entry}}, repoWith(rec).read)
			got := strings.Join(vs[0].Problems, "\n")
			if (tc.want == "") != vs[0].OK || !strings.Contains(got, tc.want) {
				t.Errorf("ok %v, problems:\n%s\nwant %q", vs[0].OK, got, tc.want)
			}
			if notes := strings.Join(vs[0].Notes, "\n"); tc.entry.Simulated() && !strings.Contains(notes, "the record is simulated, as the entry is") {
				t.Errorf("a tuned entry of the sim passes without saying its record is simulated:\n%s", notes)
			}
		})
	}
}

// tunedOn is e keyed to a pair tuned on the engine build pin.
func tunedOn(e policy.Entry, pin string) policy.Entry {
	e.Pin, e.Tuned = pin, "2026-12-05"
	e.Pair = policy.Pair{Target: strings.Repeat("a", 64), Draft: strings.Repeat("b", 64), Pin: pin}
	return e
}

// simTuned is e as tune on the sim writes it: keyed mlxcel, tuned on the
// sim's pin.
func simTuned(e policy.Entry) policy.Entry { return tunedOn(e, policy.SimPin) }

// pinnedSim is e pinned to the sim with no pair: not a tuned entry.
func pinnedSim(e policy.Entry) policy.Entry {
	e.Pin = policy.SimPin
	return e
}

// simRecord makes r the sim's: engine sim, pin sim, simulated.
func simRecord(r *record.Record) {
	r.Key.Engine, r.Engine.Name, r.Engine.Pin, r.Simulated = "sim", "sim", policy.SimPin, true
}

// A load sweep keeps its raw runs in its levels, and they are recomputed:
// check must not say it keeps none (it did, reading only the top-level
// arms, which a sweep leaves empty), and a fix it suggests names the
// commands that write a sweep, not bench's single-level run. A sweep that
// truly lacks runs says so, naming those commands.
func TestCheckSweepRunsAndFix(t *testing.T) {
	e := simTuned(goodEntry())
	e.RunnerUp = 0
	e.Schedule, _ = schedule.Parse("1-3:6,4+:1", "measured")
	e.Width = e.Schedule.At(1).Width
	const sweepCmd = "speclaunch tune (or speclaunch bench --concurrency)"
	for _, tc := range []struct {
		name        string
		edit        func(*record.Record)
		wantProblem string // "" = ok
		wantNote    string
		notNote     string // "" = no such check
	}{
		{"raw runs in its levels", nil, "", "", "keeps no raw runs"},
		{"an edited earned schedule", func(r *record.Record) {
			r.Earned = &record.Earned{Triples: [][]int{{1, 0, 6}}, Text: "1+:6"}
		}, "regenerate the record with " + sweepCmd, "", "keeps no raw runs"},
		{"an edited level figure", func(r *record.Record) { r.Levels[0].Arms[1].Stats.Median++ }, "regenerate the record with " + sweepCmd, "", ""},
		{"one level without runs", func(r *record.Record) { r.Levels[1].Arms[0].Runs = nil },
			"level 4: stored bucket width 1", `arms without raw runs, judged on their stored figures: level 4 "classic"`, "keeps no raw runs"},
		{"no raw runs at all", func(r *record.Record) {
			for i := range r.Levels {
				for j := range r.Levels[i].Arms {
					r.Levels[i].Arms[j].Runs = nil
				}
			}
		}, "level", "the record keeps no raw runs: it is judged on its stored figures, which cannot be recomputed (and the bootstrap against the default cannot be run); " + sweepCmd + " writes a record with them", "speclaunch bench writes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := sweepRecord(t)
			simRecord(&rec)
			if tc.edit != nil {
				tc.edit(&rec)
			}
			vs := check(t, &policy.Policy{Entries: []policy.Entry{e}}, repoWith(rec).read)
			probs, notes := strings.Join(vs[0].Problems, "\n"), strings.Join(vs[0].Notes, "\n")
			if (tc.wantProblem == "") != vs[0].OK || !strings.Contains(probs, tc.wantProblem) {
				t.Errorf("ok %v, problems:\n%s\nwant %q", vs[0].OK, probs, tc.wantProblem)
			}
			if !strings.Contains(notes, tc.wantNote) || tc.notNote != "" && strings.Contains(notes+probs, tc.notNote) {
				t.Errorf("notes:\n%s\nproblems:\n%s\nwant a note %q and nothing of %q", notes, probs, tc.wantNote, tc.notNote)
			}
		})
	}
}

// A tuned entry's record is read beside its layer, where tune writes it
// (policy.Entry.RecordFile), and a problem names that file; a measured
// entry's is read repository-relative. The record was read under --root
// for both, and a fresh tune's layer failed as missing.
func TestCheckReadsTunedRecordBesideItsLayer(t *testing.T) {
	sweep := sweepRecord(t)
	simRecord(&sweep)
	tuned := simTuned(goodEntry())
	tuned.RunnerUp, tuned.Record = 0, "records/t.md"
	tuned.Schedule, _ = schedule.Parse("1-3:6,4+:1", "measured")
	tuned.Width = 6
	at := func(e policy.Entry, origin string) policy.Entry { e.Origin = origin; return e }
	for _, tc := range []struct {
		name   string
		entry  policy.Entry
		rec    record.Record
		path   string // where the record must be read
		beside bool
	}{
		{"tuned, its layer named absolute", at(tuned, "/home/u/.config/speclaunch/tuned.toml:2"), sweep, "/home/u/.config/speclaunch/records/t.md", true},
		{"tuned, its layer named relative", at(tuned, "sub/tuned.toml:2"), sweep, "sub/records/t.md", true},
		{"measured", goodEntry(), goodRecord(), recPath, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			repo := files{tc.path: []byte("# record\n"), strings.TrimSuffix(tc.path, ".md") + ".json": b}
			read := func(p string, beside bool) ([]byte, error) {
				if beside != tc.beside {
					return nil, fmt.Errorf("%s read with beside %v", p, beside)
				}
				return repo.read(p)
			}
			vs, err := Check(context.Background(), &policy.Policy{Entries: []policy.Entry{tc.entry}}, read)
			if err != nil || !vs[0].OK || vs[0].Origin != tc.entry.Origin {
				t.Errorf("%v: ok %v, origin %q, problems %q", err, vs[0].OK, vs[0].Origin, vs[0].Problems)
			}
			delete(repo, tc.path)
			vs, _ = Check(context.Background(), &policy.Policy{Entries: []policy.Entry{tc.entry}}, read)
			if got := strings.Join(vs[0].Problems, "\n"); !strings.Contains(got, "record "+tc.path+": missing") {
				t.Errorf("a missing record: problems %q, want %s named", got, tc.path)
			}
		})
	}
}

// A sweep where no level beat the default earns the default at every
// load: an entry of the embedded policy would change nothing and fails,
// while a tuned entry says what tune measured (serve and policy explain
// name it), which policy check notes and passes: tune wrote such an
// entry and the check tune suggests then failed it (an operator's pass).
func TestCheckDefaultEverywhere(t *testing.T) {
	rec := sweepRecordOf(t, []record.Level{
		{Concurrency: 1, Arms: []record.Arm{sweepArm("classic", 0, 80, 81, 79), sweepArm("default", 4, 100, 101, 99), sweepArm("width", 6, 90, 91, 89)}},
		{Concurrency: 4, Arms: []record.Arm{sweepArm("classic", 0, 140, 141, 139), sweepArm("default", 4, 150, 151, 149), sweepArm("width", 6, 120, 121, 119)}},
	})
	e := goodEntry()
	e.RunnerUp = 0
	e.Schedule, _ = schedule.Parse(rec.Earned.Text, "measured")
	e.Width = e.Schedule.At(1).Width
	for _, tc := range []struct {
		name  string
		entry policy.Entry
		ok    bool
		said  string
	}{
		{"an entry of the policy", e, false, "an entry would change nothing"},
		{"a tuned entry", tunedOn(e, e.Pin), true, "the tuned entry keeps the default at every load"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := check(t, &policy.Policy{Entries: []policy.Entry{tc.entry}}, repoWith(rec).read)
			all := strings.Join(append(append([]string(nil), vs[0].Problems...), vs[0].Notes...), "\n")
			if vs[0].OK != tc.ok || !strings.Contains(all, tc.said) {
				t.Errorf("ok %v, want %v; problems and notes:\n%s\nwant %q", vs[0].OK, tc.ok, all, tc.said)
			}
		})
	}
}
