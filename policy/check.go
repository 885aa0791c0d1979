package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/speclaunch/speclaunch/bench/bootstrap"
	"github.com/speclaunch/speclaunch/key"
	"github.com/speclaunch/speclaunch/record"
)

// Verdict is `speclaunch policy check`'s finding for one entry: OK when no
// problem was found. Notes are facts a reviewer should see that do not fail
// the entry (a transcribed record, drift between the classic brackets).
type Verdict struct {
	EntryID  string
	OK       bool
	Problems []string
	Notes    []string
}

// minRuns is the bench's floor: fewer measured runs cannot show a range.
const minRuns = 3

// Check verifies every entry of p against its committed record: the .md and
// its .json twin exist, the record measures the entry's key on a real engine
// at the entry's pin, it is complete, and the entry's width beats classic
// with disjoint ranges, recomputed from the stats rather than trusted from
// the record's flag. readFile reads a repository-relative path; Check itself
// does no I/O, so every rule is a table test. Every problem is reported, not
// only the first.
func Check(p *Policy, readFile func(path string) ([]byte, error)) []Verdict {
	if p == nil {
		return nil
	}
	out := make([]Verdict, 0, len(p.Entries))
	for _, e := range p.Entries {
		out = append(out, checkEntry(e, readFile))
	}
	return out
}

func checkEntry(e Entry, readFile func(string) ([]byte, error)) Verdict {
	v := Verdict{EntryID: e.ID}
	v.Problems = entryProblems(e, readFile, &v.Notes)
	v.OK = len(v.Problems) == 0
	return v
}

// entryProblems reads every record the entry rests on and applies every
// rule to each: a cross-pair entry must hold in all of its records.
func entryProblems(e Entry, readFile func(string) ([]byte, error), notes *[]string) []string {
	recs := e.Records
	if len(recs) == 0 {
		recs = []string{e.Record}
	}
	var probs []string
	for _, path := range recs {
		var ps, ns []string
		rec, ps := readRecord(path, readFile)
		if rec != nil {
			ps = append(ps, recordProblems(e, rec, &ns)...)
			ps = append(ps, defaultProblems(e, rec, &ns)...)
			ps = append(ps, costProblems(e, path, rec)...)
		}
		prefix := ""
		if len(recs) > 1 {
			prefix = path + ": "
		}
		for _, p := range ps {
			probs = append(probs, prefix+p)
		}
		for _, n := range ns {
			*notes = append(*notes, prefix+n)
		}
	}
	return probs
}

// readRecord reads a record's .md (it must exist) and decodes its .json twin.
func readRecord(path string, readFile func(string) ([]byte, error)) (*record.Record, []string) {
	var probs []string
	if _, err := readFile(path); err != nil {
		probs = append(probs, fmt.Sprintf("record %s: %s", path, readProblem(err)))
	}
	jsonPath := strings.TrimSuffix(path, ".md") + ".json"
	data, err := readFile(jsonPath)
	if err != nil {
		return nil, append(probs, fmt.Sprintf("record twin %s: %s", jsonPath, readProblem(err)))
	}
	if len(data) > maxRecordBytes {
		return nil, append(probs, fmt.Sprintf("record twin %s is %d bytes, above the %d-byte cap for a record", jsonPath, len(data), maxRecordBytes))
	}
	var rec record.Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, append(probs, fmt.Sprintf("record twin %s does not parse as a record: %v; regenerate it with speclaunch bench", jsonPath, err))
	}
	if rec.Schema != record.Schema {
		return nil, append(probs, fmt.Sprintf("record twin %s has schema %d; this speclaunch reads record schema %d", jsonPath, rec.Schema, record.Schema))
	}
	return &rec, probs
}

// maxRecordBytes caps a record's .json: the largest committed one is about
// 160 KB; a file far above it is not a record.
const maxRecordBytes = 64 << 20

// defaultProblems applies the rule that an entry's width beats the
// engine's default (the record's default arm) with probability >=
// bootstrap.Level, by the bootstrap recomputed from the raw runs. Records
// written before records carried comparisons (no method.bootstrap) predate
// the rule: what it would say of them is a note, so that the entries they
// earned keep their backing until re-measured (docs/policy.md).
func defaultProblems(e Entry, rec *record.Record, notes *[]string) []string {
	var probs []string
	legacy := rec.Method.Bootstrap == nil
	report := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		if legacy {
			*notes = append(*notes, "the record predates the rule that an entry beats the engine's default with probability >= "+
				fmt.Sprintf("%.2f", bootstrap.Level)+" (no bootstrap in its method), which it would fail: "+msg+"; re-measure to keep the entry under the rule")
			return
		}
		probs = append(probs, msg)
	}
	rep := rec.Representative(e.Width)
	if rep == nil {
		return nil // reported by recordProblems
	}
	def := rec.DefaultArm()
	switch {
	case def == nil || def.Status != record.StatusOK:
		report("the record has no default arm that measured, so width %d was never compared with the engine's default", e.Width)
	case def.RanWidth() == e.Width:
		report("width %d is the record's default arm's width: the entry changes nothing against the engine's default", e.Width)
	default:
		c, ok := bootstrap.CompareArms(rep, def, "default")
		switch {
		case !ok:
			report("width %d cannot be compared with the default (width %d): the record keeps no raw runs for both", e.Width, def.RanWidth())
		case c.PBetter < bootstrap.Level:
			report("width %d beats the default (width %d) with probability %.3f, below %.2f (median ratio %.3f, 95%% interval %.3f-%.3f)",
				e.Width, def.RanWidth(), c.PBetter, bootstrap.Level, c.Ratio, c.Lo, c.Hi)
		default:
			*notes = append(*notes, fmt.Sprintf("width %d beats the default (width %d) with probability %.3f (median ratio %.3f, 95%% interval %.3f-%.3f)",
				e.Width, def.RanWidth(), c.PBetter, c.Ratio, c.Lo, c.Hi))
		}
		if ok && !legacy && rep.VsDefault != nil && math.Abs(rep.VsDefault.PBetter-c.PBetter) > 1e-9 {
			probs = append(probs, fmt.Sprintf("the record's stored comparison of width %d with the default (P %.3f) disagrees with its raw runs (P %.3f); regenerate the record's analysis", e.Width, rep.VsDefault.PBetter, c.PBetter))
		}
	}
	return probs
}

// costTolerance allows the two-decimal rounding policy propose writes.
const costTolerance = 0.0051

// costProblems verifies the entry's cost table for this record, if it
// carries one, against the record's own figures.
func costProblems(e Entry, path string, rec *record.Record) []string {
	var probs []string
	for _, row := range e.Cost {
		if row.Record != path {
			continue
		}
		if row.ClassicMS > 0 {
			got := 0.0
			for _, a := range rec.Arms {
				if a.Kind == record.KindClassic && a.Status == record.StatusOK {
					got = a.Cost.MSPerCycle
				}
			}
			if math.Abs(got-row.ClassicMS) > costTolerance {
				probs = append(probs, fmt.Sprintf("cost table: classic is %.2f ms per token in the entry but %.2f in the record", row.ClassicMS, got))
			}
		}
		for i, w := range row.Widths {
			a := rec.Representative(w)
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

func readProblem(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "missing; commit the record the entry cites, or fix the entry's record path"
	}
	return "cannot be read: " + err.Error()
}

// recordProblems applies the rules that need the decoded record.
func recordProblems(e Entry, rec *record.Record, notes *[]string) []string {
	var probs []string
	problem := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	note := func(format string, args ...any) { *notes = append(*notes, fmt.Sprintf(format, args...)) }

	if diff := keyDiff(e.Key, rec.Key); diff != "" {
		problem("record measures a different key than the entry: %s", diff)
	}
	if rec.Simulated {
		problem("record is simulated: a record from the sim engine never backs an entry; measure on a real engine and GPU")
	}
	if rec.Transcribed != nil {
		if strings.TrimSpace(rec.Transcribed.Source) == "" {
			problem("record is transcribed but names no source; a transcription is accepted only with transcribed.source set")
		} else {
			note("figures transcribed from %s (%s), not measured by speclaunch", rec.Transcribed.Source, rec.Transcribed.Date)
		}
	}
	if !rec.Complete {
		problem("record is incomplete (the bench was interrupted); re-run it to completion")
	}
	if pin := strings.TrimSpace(rec.Engine.Pin); pin != e.Pin {
		problem("pin mismatch: the entry pins %q but the record measured %q; re-measure, or pin the entry to what was measured", e.Pin, pin)
	}

	classicMax, classicFrom, ok := classicCeiling(rec)
	if !ok {
		problem("record has no classic arm that ran with n >= %d: there is nothing to beat", minRuns)
	} else {
		note("classic range ceiling %.2f tok/s, from %s", classicMax, classicFrom)
	}

	widthArms, skipped := armsAt(rec, e.Width)
	for _, a := range skipped {
		note("arm %q at width %d is %s%s: not ranked", a.Label, a.Width, a.Status, reason(a))
	}
	if len(widthArms) == 0 {
		problem("width %d has no measured arm in the record (measured widths: %s); an entry's width must be one the record measured", e.Width, measuredWidths(rec))
	}
	for _, a := range widthArms {
		switch {
		case a.Stats.N < minRuns:
			problem("arm %q at width %d has n = %d; the floor is %d runs", a.Label, e.Width, a.Stats.N, minRuns)
		case ok && !(a.Stats.Min > classicMax):
			problem("arm %q at width %d does not beat classic with disjoint ranges: its min %.2f is not above classic's max %.2f", a.Label, e.Width, a.Stats.Min, classicMax)
		}
		if !a.BeatsClassic {
			problem("arm %q at width %d is not marked beats_classic in the record", a.Label, e.Width)
		}
	}

	if e.RunnerUp != 0 {
		ru, _ := armsAt(rec, e.RunnerUp)
		switch {
		case len(ru) == 0:
			problem("runner_up %d has no measured arm in the record (measured widths: %s)", e.RunnerUp, measuredWidths(rec))
		case ok && !slices.ContainsFunc(ru, func(a record.Arm) bool { return a.Stats.Min > classicMax }):
			note("runner-up width %d does not beat classic with disjoint ranges", e.RunnerUp)
		}
	}
	if rec.Drift.First.N > 0 && rec.Drift.Last.N > 0 && !rec.Drift.Overlap {
		note("the classic brackets do not overlap: the host drifted during the run (%s)", rec.Drift.Verdict)
	}
	return probs
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

// classicCeiling is the highest classic throughput the record saw: the max
// over every classic arm that ran and both drift brackets. Taking the
// highest is the conservative reading of "disjoint ranges".
func classicCeiling(rec *record.Record) (float64, string, bool) {
	max, ok := 0.0, false
	var from []string
	take := func(s record.Stats, what string) {
		if s.N < minRuns {
			return
		}
		if !ok || s.Max > max {
			max = s.Max
		}
		ok = true
		from = append(from, what)
	}
	for _, a := range rec.Arms {
		if a.Kind == "classic" && a.Status == record.StatusOK {
			take(a.Stats, "arm "+strconv.Quote(a.Label))
		}
	}
	take(rec.Drift.First, "the opening classic bracket")
	take(rec.Drift.Last, "the closing classic bracket")
	return max, strings.Join(from, ", "), ok
}

// armsAt returns the speculative arms that ran at width w, and separately
// those at w that did not measure (failed, or NOT A MEASUREMENT).
func armsAt(rec *record.Record, w int) (ran, skipped []record.Arm) {
	for _, a := range rec.Arms {
		if a.Kind == "classic" || a.Width != w {
			continue
		}
		if a.Status == record.StatusOK {
			ran = append(ran, a)
		} else {
			skipped = append(skipped, a)
		}
	}
	return ran, skipped
}

func measuredWidths(rec *record.Record) string {
	var ws []int
	for _, a := range rec.Arms {
		if a.Kind != "classic" && a.Status == record.StatusOK && !slices.Contains(ws, a.Width) {
			ws = append(ws, a.Width)
		}
	}
	if len(ws) == 0 {
		return "none"
	}
	slices.Sort(ws)
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = strconv.Itoa(w)
	}
	return strings.Join(s, ", ")
}

func reason(a record.Arm) string {
	if a.StatusReason == "" {
		return ""
	}
	return " (" + a.StatusReason + ")"
}
