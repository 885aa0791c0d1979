// Package policycheck verifies policy entries against the records that earn
// them (`speclaunch policy check`). It is apart from package policy so that
// resolving a width never drags in the record format or the evidence rule.
package policycheck

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/speclaunch/speclaunch/internal/evidence"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/record"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/width"
)

// Verdict is `speclaunch policy check`'s finding for one entry: OK when no
// problem was found. Notes are facts a reviewer should see that do not fail
// the entry (a transcribed record, drift between the classic brackets).
type Verdict struct {
	EntryID  string   `json:"entry_id"`
	Origin   string   `json:"origin"` // the file and line the entry came from
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
	Notes    []string `json:"notes"`
}

// Check verifies every entry of p against its committed records: the .md
// and its .json twin exist, the twin is a valid record (record.Decode), the
// record measures the entry's key on a real engine at the entry's pin, its
// stored figures agree with its raw runs, and the entry's width passes the
// rule (evidence.Judge) on figures recomputed from those runs. readFile
// reads a record's file: a repository-relative path, or with beside a path
// on this machine, where a tuned entry's records sit beside its layer
// (policy.Entry.RecordFile, the rule resolve and policy explain read).
// Check itself does no I/O, so every rule is a table test. Every problem
// is reported, not only the first. An error is the context's: a signal
// stops the bootstrap.
func Check(ctx context.Context, p *policy.Policy, readFile ReadFunc) ([]Verdict, error) {
	if p == nil {
		return nil, nil
	}
	out := make([]Verdict, 0, len(p.Entries))
	for _, e := range p.Entries {
		v, err := checkEntry(ctx, e, readFile)
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}

// checkEntry reads every record the entry rests on and applies every rule
// to each: a cross-pair entry must hold in all of its records.
func checkEntry(ctx context.Context, e policy.Entry, readFile ReadFunc) (Verdict, error) {
	v := Verdict{EntryID: e.ID, Origin: e.Origin}
	recs := e.Records
	if len(recs) == 0 {
		recs = []string{e.Record}
	}
	for _, path := range recs {
		f := findings{}
		rec, ps := readRecord(e, path, readFile)
		f.probs = ps
		if rec != nil {
			if err := f.record(ctx, e, path, rec); err != nil {
				return v, err
			}
		}
		prefix := ""
		if len(recs) > 1 {
			prefix = path + ": "
		}
		for _, p := range f.probs {
			v.Problems = append(v.Problems, prefix+p)
		}
		for _, n := range f.notes {
			v.Notes = append(v.Notes, prefix+n)
		}
	}
	v.OK = len(v.Problems) == 0
	return v, nil
}

// findings gathers one record's problems and notes.
type findings struct{ probs, notes []string }

func (f *findings) problem(format string, args ...any) {
	f.probs = append(f.probs, fmt.Sprintf(format, args...))
}
func (f *findings) note(format string, args ...any) {
	f.notes = append(f.notes, fmt.Sprintf(format, args...))
}

// record applies every rule to one decoded record.
func (f *findings) record(ctx context.Context, e policy.Entry, path string, rec *record.Record) error {
	ev := evidence.Of(rec)
	f.identity(e, rec)
	f.runs(rec, ev)
	f.probs = append(f.probs, ev.Disagreements()...)
	levels, err := evidence.LevelDisagreements(ctx, rec)
	if err != nil {
		return err
	}
	f.probs = append(f.probs, levels...)
	if len(rec.Levels) > 0 {
		return f.schedule(ctx, e, rec)
	}
	if err := f.width(ctx, e, ev); err != nil {
		return err
	}
	f.runnerUp(e, ev)
	f.drift(ev)
	f.probs = append(f.probs, costProblems(e, path, ev)...)
	return nil
}

// ReadFunc reads a record's file: path is repository-relative, or with
// beside a path on this machine (a tuned entry's record, beside its layer).
type ReadFunc func(path string, beside bool) ([]byte, error)

// readRecord reads the entry's record listed (as the entry lists it) where it
// is (policy.Entry.RecordFile), its .md (it must exist) and its .json twin,
// decoded (record.Decode validates it before anything is derived). A
// problem names the file where it was looked for.
func readRecord(e policy.Entry, listed string, readFile ReadFunc) (*record.Record, []string) {
	var probs []string
	path, beside := e.RecordFile(listed)
	if _, err := readFile(path, beside); err != nil {
		probs = append(probs, fmt.Sprintf("record %s: %s", path, readProblem(err, beside)))
	}
	jsonPath := strings.TrimSuffix(path, ".md") + ".json"
	data, err := readFile(jsonPath, beside)
	if err != nil {
		return nil, append(probs, fmt.Sprintf("record twin %s: %s", jsonPath, readProblem(err, beside)))
	}
	if len(data) > safefile.RecordLimit {
		return nil, append(probs, fmt.Sprintf("record twin %s is %d bytes, above the %d-byte cap for a record", jsonPath, len(data), safefile.RecordLimit))
	}
	rec, err := record.Decode(data)
	if err != nil {
		return nil, append(probs, fmt.Sprintf("record twin %s: %v", jsonPath, err))
	}
	return rec, probs
}

// identity checks what the record is: the entry's key, a real engine at
// the entry's pin, complete, and a transcription that names its source.
func (f *findings) identity(e policy.Entry, rec *record.Record) {
	rk := rec.Key
	if eng, err := key.ParseEngine(rk.Engine); err == nil && e.Simulated() {
		// tune on the sim keys its entry by the engine the sim resolves
		// with (mlxcel), as a launch on the sim looks it up.
		rk.Engine = string(width.PolicyEngine(eng))
	}
	if diff := keyDiff(e.Key, rk); diff != "" {
		f.problem("record measures a different key than the entry: %s", diff)
	}
	if t := rec.Transcribed; t != nil && strings.TrimSpace(t.Source) != "" {
		f.note("figures transcribed from %s (%s), not measured by speclaunch", t.Source, t.Date)
	}
	if pin := strings.TrimSpace(rec.Engine.Pin); pin != e.Pin {
		f.problem("pin mismatch: the entry pins %q but the record measured %q; re-measure, or pin the entry to what was measured", e.Pin, pin)
	}
}

// runs says what the figures were recomputed from: the record's arms, or a
// load sweep's arms level by level (its top-level arms are empty, and its
// levels' runs are recomputed by evidence.LevelDisagreements and Earn).
// Without raw runs, the note names the command that writes such a record
// with them (evidence.WrittenBy).
func (f *findings) runs(rec *record.Record, ev *evidence.Evidence) {
	levels := []*evidence.Evidence{ev}
	if len(rec.Levels) > 0 {
		levels = levels[:0]
		for i := range rec.Levels {
			levels = append(levels, evidence.Of(rec.AtLevel(i)))
		}
	}
	var without []string
	kept := false
	for i, l := range levels {
		at := ""
		if len(rec.Levels) > 0 {
			at = fmt.Sprintf("level %d ", rec.Levels[i].Concurrency)
		}
		for _, a := range l.Arms {
			kept = kept || a.FromRuns
			if !a.FromRuns {
				without = append(without, at+strconv.Quote(a.Label))
			}
		}
	}
	switch {
	case !kept:
		f.note("the record keeps no raw runs: it is judged on its stored figures, which cannot be recomputed (and the bootstrap against the default cannot be run); %s writes a record with them", evidence.WrittenBy(rec))
	case len(without) > 0:
		f.note("arms without raw runs, judged on their stored figures: %s", strings.Join(without, ", "))
	}
}

// width judges the entry's width by the rule (evidence.Judge). A record
// made before records carried comparisons (no method.bootstrap) predates
// "beats the default": what that rule says of it is a note, so that the
// entries it earned keep their backing until re-measured (docs/policy.md).
func (f *findings) width(ctx context.Context, e policy.Entry, ev *evidence.Evidence) error {
	j, err := ev.Judge(ctx, e.Width)
	if err != nil {
		return err
	}
	legacy := ev.Rec.Method.Bootstrap == nil
	for _, fl := range j.Fails {
		switch {
		case fl.Rule == evidence.RuleDefault && legacy:
			f.note("the record predates the rule that an entry beats the engine's default with probability >= %.2f (no bootstrap in its method), which it would fail: %s; re-measure to keep the entry under the rule", evidence.Level, fl.Msg)
		default:
			f.probs = append(f.probs, fl.Msg)
		}
	}
	if c := ev.Classic; c != nil && c.Status == record.StatusOK {
		f.note("classic range %.2f–%.2f tok/s over %d runs, both brackets (ceiling %.2f)", c.Stats.Min, c.Stats.Max, c.Stats.N, c.Stats.Max)
	}
	for _, a := range ev.Arms {
		if a.Kind != record.KindClassic && a.RanWidth() == e.Width && a.Status != record.StatusOK {
			f.note("arm %q at width %d is %s%s: not ranked", a.Label, e.Width, a.Status, reason(*a.Arm))
		}
	}
	if c := j.VsDefault; c != nil && j.Arm != nil {
		if len(j.Fails) == 0 {
			f.note("width %d beats the default (width %d) with probability %.3f (median ratio %.3f, 95%% interval %.3f-%.3f)",
				e.Width, ev.Default.RanWidth(), c.PBetter, c.Ratio, c.Lo, c.Hi)
		}
		if !legacy {
			f.probs = append(f.probs, evidence.ComparisonDiff(j.Arm.Label, "vs_default", j.Arm.VsDefault, c)...)
		}
	}
	return nil
}

// schedule judges an entry backed by a load sweep: its schedule must be
// the one the record's levels earn by the rule per bucket, recomputed from
// the raw runs, and the record must be one that may back an entry.
func (f *findings) schedule(ctx context.Context, e policy.Entry, rec *record.Record) error {
	_, buckets, earned, err := evidence.Earn(ctx, rec)
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		f.problem("the record's levels earn no schedule: %v", err)
		return nil
	}
	f.probs = append(f.probs, f.recordFails(e, rec)...)
	if got := e.Sched(); !slices.EqualFunc(got.Triples(), earned.Triples, slices.Equal) {
		f.problem("the entry's schedule %s is not the one the record's levels earn (%s); take the record's, or re-measure", got, earned.Text)
	}
	allDefault := true
	for i, b := range buckets {
		allDefault = allDefault && b.From == evidence.FromDefault
		f.note("%s", b.At(rec.Levels[i].Concurrency))
	}
	switch {
	case allDefault && e.Tuned != "":
		// tune measured the pair and kept the default at every load: the
		// entry says so (policy explain, serve's startup line) where
		// nothing would otherwise, and re-running tune replaces it.
		f.note("no level of the record beat the engine's default: the tuned entry keeps the default at every load, as tune measured")
	case allDefault:
		f.problem("no level of the record beat the engine's default: an entry would change nothing")
	}
	return nil
}

// recordFails is why rec cannot back an entry (evidence.RecordFails),
// except that a tuned entry of the sim (policy.Entry.Simulated) rests on
// the sim's simulated record by design: what tune on the sim writes
// (docs/schedule.md). That is a note; for any other entry, a problem.
func (f *findings) recordFails(e policy.Entry, rec *record.Record) []string {
	if e.Simulated() && rec.Simulated {
		r := *rec
		r.Simulated = false
		f.note("the record is simulated, as the entry is (tuned on the sim, pin %q): it answers only its pair of stand-ins on the sim, and a simulated record backs no other entry", e.Pin)
		rec = &r
	}
	return evidence.Of(rec).RecordFails()
}

// runnerUp: the runner-up must have been measured; that it beats classic
// is noted, not required.
func (f *findings) runnerUp(e policy.Entry, ev *evidence.Evidence) {
	if e.RunnerUp == 0 {
		return
	}
	switch a := ev.Width(e.RunnerUp); {
	case a == nil:
		f.problem("runner_up %d has no measured arm in the record", e.RunnerUp)
	case !ev.BeatsClassic(a):
		f.note("runner-up width %d does not beat classic with disjoint ranges", e.RunnerUp)
	}
}

// drift notes classic brackets that do not overlap: the margin already
// takes classic over both, so drift is not a rule of its own.
func (f *findings) drift(ev *evidence.Evidence) {
	d := ev.Rec.Drift
	if c := ev.Classic; c != nil && c.FromRuns {
		d = evidence.Drift(c.Arm)
	}
	if d.First.N > 0 && d.Last.N > 0 && !d.Overlap {
		f.note("the classic brackets do not overlap: the host drifted during the run (%s)", d.Verdict)
	}
}

// costTolerance allows the two-decimal rounding policy propose writes.
const costTolerance = 0.0051

// costProblems verifies the entry's cost table for this record, if it
// carries one, against the record's figures recomputed from its runs.
func costProblems(e policy.Entry, path string, ev *evidence.Evidence) []string {
	var probs []string
	for _, row := range e.Cost {
		if row.Record != path {
			continue
		}
		if row.ClassicMS > 0 {
			got := 0.0
			if c := ev.Classic; c != nil && c.Status == record.StatusOK {
				got = c.Cost.MSPerCycle
			}
			if math.Abs(got-row.ClassicMS) > costTolerance {
				probs = append(probs, fmt.Sprintf("cost table: classic is %.2f ms per token in the entry but %.2f in the record", row.ClassicMS, got))
			}
		}
		for i, w := range row.Widths {
			a := ev.Width(w)
			switch {
			case a == nil:
				probs = append(probs, fmt.Sprintf("cost table: width %d has no measured arm in the record", w))
			case math.Abs(a.Cost.MSPerCycle-row.MS[i]) > costTolerance:
				probs = append(probs, fmt.Sprintf("cost table: width %d is %.2f ms per cycle in the entry but %.2f in the record (arm %q)", w, row.MS[i], a.Cost.MSPerCycle, a.Label))
			}
		}
	}
	return probs
}

// readProblem says why a record's file could not be read, and the fix: a
// tuned entry's record (beside its layer) is tune's to write, not a
// repository's to commit.
func readProblem(err error, beside bool) string {
	switch {
	case errors.Is(err, fs.ErrNotExist) && beside:
		return "missing; re-run speclaunch tune on this pair, or fix the entry's record path (relative to its file's directory)"
	case errors.Is(err, fs.ErrNotExist):
		return "missing; commit the record the entry cites, or fix the entry's record path"
	}
	return "cannot be read: " + err.Error()
}

// keyDiff names each field where the record's key differs from the entry's,
// comparing parsed values so that spellings such as "sm_121" and "12.1" agree.
func keyDiff(k key.Key, r record.Key) string {
	var d []string
	if e, err := key.ParseEngine(r.Engine); err != nil || e != k.Engine {
		d = append(d, fmt.Sprintf("engine %q vs %s", r.Engine, k.Engine))
	}
	if dr, err := key.ParseDrafter(r.Drafter); err != nil || dr != k.Drafter {
		d = append(d, fmt.Sprintf("drafter %q vs %s", r.Drafter, k.Drafter))
	}
	if c, err := key.ParseCapability(r.Capability); err != nil || c != k.Capability {
		d = append(d, fmt.Sprintf("capability %q vs %s", r.Capability, k.Capability))
	}
	if q, err := key.ParseQuant(r.Quant); err != nil || q != k.Quant {
		d = append(d, fmt.Sprintf("quant %q vs %s", r.Quant, k.Quant))
	}
	if len(d) == 0 {
		return ""
	}
	return "record " + strings.Join(d, ", ") + " (record value first)"
}

func reason(a record.Arm) string {
	if a.StatusReason == "" {
		return ""
	}
	return " (" + a.StatusReason + ")"
}
