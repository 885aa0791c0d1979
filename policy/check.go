package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

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

// entryProblems reads the entry's record and applies every rule it can.
func entryProblems(e Entry, readFile func(string) ([]byte, error), notes *[]string) []string {
	var probs []string
	if _, err := readFile(e.Record); err != nil {
		probs = append(probs, fmt.Sprintf("record %s: %s", e.Record, readProblem(err)))
	}
	jsonPath := strings.TrimSuffix(e.Record, ".md") + ".json"
	data, err := readFile(jsonPath)
	if err != nil {
		return append(probs, fmt.Sprintf("record twin %s: %s", jsonPath, readProblem(err)))
	}
	var rec record.Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return append(probs, fmt.Sprintf("record twin %s does not parse as a record: %v; regenerate it with speclaunch bench", jsonPath, err))
	}
	if rec.Schema != record.Schema {
		return append(probs, fmt.Sprintf("record twin %s has schema %d; this speclaunch reads record schema %d", jsonPath, rec.Schema, record.Schema))
	}
	return append(probs, recordProblems(e, &rec, notes)...)
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
