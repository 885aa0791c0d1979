package cli

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/speclaunch/speclaunch/internal/bench"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/policycheck"
	"github.com/speclaunch/speclaunch/internal/quote"
	"github.com/speclaunch/speclaunch/internal/record"
)

// PolicyCmd groups the policy subcommands.
type PolicyCmd struct {
	List    PolicyListCmd    `cmd:"" help:"Show the merged policy: defaults and measured entries, with the file and line each came from."`
	Explain PolicyExplainCmd `cmd:"" help:"Say why a key (engine, drafter, capability, quant) resolves as it does."`
	Check   PolicyCheckCmd   `cmd:"" help:"Verify every entry against its records: each exists and is valid, matches the key and the pin, was measured on a real engine, its stored figures match its raw runs, and the width beats classic with disjoint ranges and the engine's default."`
	Propose PolicyProposeCmd `cmd:"" help:"Apply the cross-pair rule to bench records of one key (one per model pair) and print the entry they earn, if any."`
}

// PolicyListCmd prints the merged policy.
type PolicyListCmd struct {
	Policy  []string `help:"Extra policy file layered over the embedded one; repeatable." placeholder:"FILE"`
	Profile string   `help:"Also layer this profile's policy files and [[policy.entry]] tables." placeholder:"PATH|NAME"`
	JSON    bool     `help:"Print JSON."`
}

func (e *Env) policyOnly(profile string, files []string) (*policy.Policy, error) {
	flags := map[string]string{}
	if profile != "" {
		flags["profile"] = profile
	}
	in := (&LaunchFlags{Policy: files}).input(e, nil, nil)
	in.Flags = flags
	l, err := e.load(in)
	if err != nil {
		return nil, err
	}
	return l.Policy, nil
}

// Run implements `policy list`.
func (c *PolicyListCmd) Run(e *Env) error {
	pol, err := e.policyOnly(c.Profile, c.Policy)
	if err != nil {
		return err
	}
	if c.JSON {
		return writeJSON(e.Stdout, policyJSON(pol))
	}
	w := e.Stdout
	fmt.Fprintf(w, "layers (lowest first): %v\n\ndefaults (per engine and drafter kind; mirror each engine's own):\n", pol.Layers)
	var rows [][]string
	for _, d := range pol.Defaults {
		rows = append(rows, []string{string(d.Engine), string(d.Drafter), "width " + strconv.Itoa(d.Width), d.Origin})
	}
	for _, l := range alignRows(rows) {
		fmt.Fprintln(w, "  "+l)
	}
	fmt.Fprintln(w, "\nmeasured entries:")
	if len(pol.Entries) == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	rows = rows[:0]
	for _, en := range pol.Entries {
		rows = append(rows, []string{en.ID + ":", string(en.Key.Engine), "drafter=" + string(en.Key.Drafter),
			"capability=" + en.Key.Capability.String(), "quant=" + string(en.Key.Quant), "-> " + entryAnswer(en)})
	}
	heads := alignRows(rows)
	for i, en := range pol.Entries {
		fmt.Fprint(w, "  "+heads[i])
		if en.RunnerUp > 0 {
			fmt.Fprintf(w, " (runner-up %d)", en.RunnerUp)
		}
		recs := en.Records
		if len(recs) == 0 {
			recs = []string{en.Record}
		}
		word := "record"
		if len(recs) > 1 {
			word = "records"
		}
		fmt.Fprintf(w, "\n      pin %s; %s %s; %s\n", en.Pin, word, strings.Join(recs, ", "), en.Origin)
		if len(en.Cost) > 0 {
			fmt.Fprintf(w, "      cost tables for %d record(s)\n", len(en.Cost))
		}
	}
	return nil
}

// entryAnswer is what an entry answers, as policy list shows it: its
// width, or a schedule of more than one bucket as the startup line says
// it ("width 16 at 1-3, off at 4+"), whose width alone ("width 16") hid
// that speculation is off from 4 requests up.
func entryAnswer(en policy.Entry) string {
	if len(en.Schedule) > 1 {
		return en.Schedule.Describe()
	}
	return "width " + strconv.Itoa(en.Width)
}

// PolicyExplainCmd explains one key.
type PolicyExplainCmd struct {
	LaunchFlags `embed:""`
	ListenFlags `embed:""`
	JSON        bool `help:"Print JSON."`
}

// Run implements `policy explain`: the key comes from the same flags,
// profile and facts as resolve (so --capability/--quant/--draft-kind ask
// about a hypothetical host).
func (c *PolicyExplainCmd) Run(e *Env) error {
	l, p, err := c.hypothetical(e, plan.Options{NoCommand: true}) // explain shows no engine command
	if err != nil {
		return err
	}
	r := p.Resolution
	lines := []string{}
	if r.Source != "off" {
		lines = l.Policy.ExplainPair(r.Key, p.Facts.Pair)
	}
	if c.JSON {
		return writeJSON(e.Stdout, map[string]any{"key": keyMap(r.Key), "resolution": resolutionJSON(p, l.Notices), "explain": lines})
	}
	fmt.Fprintln(e.Stdout, p.Headline())
	fmt.Fprintf(e.Stdout, "key: %s\n", r.Key)
	order := []string{
		"1. operator override: a width (flag, LLAMA_ARG_DRAFT_BLOCK_SIZE, MLXCEL_DRAFT_BLOCK_SIZE, engine-unit flag/env, profile draft.block_size) or a schedule (--draft-schedule, MLXCEL_DRAFT_SCHEDULE, profile draft.schedule)",
		"2. a width the drafter checkpoint declares",
		"3. a tuned entry for this very model pair and engine build (speclaunch tune), then a measured policy entry for exactly this key",
		"4. the per-(engine, drafter) default",
	}
	fmt.Fprintln(e.Stdout, "precedence:")
	for _, o := range order {
		fmt.Fprintln(e.Stdout, "  "+o)
	}
	fmt.Fprintf(e.Stdout, "answered by: %s\n", r.Source)
	for _, ln := range lines {
		fmt.Fprintln(e.Stdout, "  "+ln)
	}
	writeNotes(e.Stdout, p, l.Notices) // an empty tuned layer, which no layer line names
	return nil
}

func keyMap(k key.Key) map[string]string {
	return map[string]string{"engine": string(k.Engine), "drafter": string(k.Drafter), "capability": k.Capability.String(), "quant": string(k.Quant)}
}

// PolicyCheckCmd verifies entries against records.
type PolicyCheckCmd struct {
	Policy  []string `help:"Also check this policy file; repeatable." placeholder:"FILE"`
	Profile string   `help:"Also check this profile's policy." placeholder:"PATH|NAME"`
	Root    string   `help:"Directory the committed records' paths are relative to (default ., the current directory); a tuned entry's records are found beside its file." default:"." placeholder:"DIR"`
	JSON    bool     `help:"Print JSON."`
}

// Run implements `policy check`: every entry of the merged policy, the
// user's tuned layer's among them (docs/policy.md), each with the file it
// came from; exit 1 when any entry fails.
func (c *PolicyCheckCmd) Run(e *Env) error {
	pol, err := e.policyOnly(c.Profile, c.Policy)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(c.Root); err != nil || !fi.IsDir() {
		// Every record would read as missing, each entry a failure
		// (exit 1), where the mistake is the flag's.
		what := "is not a directory"
		if err != nil {
			what = "cannot be used: " + err.Error()
		}
		return usage(fmt.Errorf("flag --root: %s %s", c.Root, what), "give the directory the records' paths are relative to (the repository's root)")
	}
	verdicts, err := policycheck.Check(e.Ctx, pol, c.reader(e))
	if err != nil {
		return fmt.Errorf("policy check stopped: %w", err)
	}
	failed := 0
	for _, v := range verdicts {
		if !v.OK {
			failed++
		}
	}
	if c.JSON {
		if err := writeJSON(e.Stdout, verdicts); err != nil {
			return err
		}
	} else {
		for _, v := range verdicts {
			status := "ok  "
			if !v.OK {
				status = "FAIL"
			}
			fmt.Fprintf(e.Stdout, "%s %s  from %s\n", status, v.EntryID, v.Origin)
			for _, p := range v.Problems {
				fmt.Fprintf(e.Stdout, "     problem: %s\n", p)
			}
			for _, n := range v.Notes {
				fmt.Fprintf(e.Stdout, "     note: %s\n", n)
			}
		}
		fmt.Fprintf(e.Stdout, "%s checked, %d failed\n", entries(len(verdicts)), failed)
	}
	if failed == 1 {
		return exitCode(1, errors.New("1 policy entry is not backed by its records"))
	}
	if failed > 1 {
		return exitCode(1, fmt.Errorf("%d policy entries are not backed by their records", failed))
	}
	return nil
}

// reader reads a record's file for the check: a tuned entry's where it
// sits, beside its layer (policy.Entry.RecordFile: the tuned layer's
// records were read under --root, and a fresh tune failed as missing);
// any other under --root, or for the embedded policy from the copies
// embedded in the binary when they are not on disk.
func (c *PolicyCheckCmd) reader(e *Env) policycheck.ReadFunc {
	return func(path string, beside bool) ([]byte, error) {
		if beside {
			return record.ReadFile(e.Ctx, path)
		}
		b, err := record.ReadFile(e.Ctx, filepath.Join(c.Root, filepath.FromSlash(path)))
		if err == nil || e.Records == nil || !errors.Is(err, fs.ErrNotExist) {
			return b, err
		}
		return fs.ReadFile(e.Records, path)
	}
}

// PolicyProposeCmd applies the cross-pair rule of docs/policy.md to bench
// records of one key made with different model pairs.
type PolicyProposeCmd struct {
	Records []string `arg:"" help:"Bench records (.json twins, or their .md paths) of one key, one per model pair." placeholder:"RECORD"`
	JSON    bool     `help:"Print JSON."`
}

// Run implements `policy propose`.
func (c *PolicyProposeCmd) Run(e *Env) error {
	recs, err := readRecords(e, c.Records)
	if err != nil {
		return err
	}
	for _, r := range recs {
		if len(r.Levels) > 0 && len(recs) > 1 {
			return usage(fmt.Errorf("record %s is a load sweep: a schedule is proposed from one load sweep at a time", r.Name), "give that record alone")
		}
	}
	if len(recs[0].Levels) > 0 {
		return c.schedule(e, recs[0])
	}
	d, err := bench.Choose(e.Ctx, recs)
	if err != nil {
		return fmt.Errorf("policy propose stopped: %w", err)
	}
	// The entry, and why none is earned, decide the exit with --json as
	// without it (--json exited 0 when no entry was earned). Why is our
	// own text, printed whole: the records' own words in it (their names,
	// arm labels) are quoted and bounded where it is built (evidence).
	var entry string
	var refused error
	if !d.Eligible {
		refused = fmt.Errorf("the records do not earn an entry: %s", d.Why)
	} else {
		entry = bench.EntryFor(recs, d)
		if refused = loaderAccepts(entry); refused != nil {
			entry = ""
		}
	}
	if c.JSON {
		if err := writeJSON(e.Stdout, struct {
			bench.Decision
			Entry string `json:"entry"` // "" when none is earned
		}{d, entry}); err != nil {
			return err
		}
	} else {
		writeDecision(e.Stdout, recs, d)
		if entry != "" {
			// Why none is earned is the error's alone, on stderr
			// (docs/policy.md): it was on stdout too.
			writeClauses(e.Stdout, "", d.Why)
			fmt.Fprintf(e.Stdout, "\n# chosen by the cross-pair rule (docs/policy.md) over %d record(s)\n%s", len(recs), entry)
		}
	}
	if refused != nil {
		return exitCode(1, refused)
	}
	return nil
}

// writeDecision prints the cross-pair rule's figures; its reason is the
// caller's to print, where an entry is earned.
func writeDecision(w io.Writer, recs []*record.Record, d bench.Decision) {
	fmt.Fprintf(w, "key: engine=%s drafter=%s capability=%s quant=%s, %d record(s)\n", recs[0].Key.Engine, recs[0].Key.Drafter, recs[0].Key.Capability, recs[0].Key.Quant, len(recs))
	for _, l := range d.PerRecord {
		writeClauses(w, "  ", l)
	}
	fmt.Fprintln(w, "widths ranked by their worst fraction of each record's best median:")
	for _, cd := range d.Ranked {
		mark := ""
		switch {
		case cd.Width == d.Width && d.Eligible:
			mark = "  <- chosen"
		case cd.Width == d.RunnerUp:
			mark = "  <- runner-up"
		}
		state := "passes"
		if len(cd.Fails) > 0 {
			state = "fails"
		}
		fmt.Fprintf(w, "  width %-3d %.3f%s  (%s)\n", cd.Width, cd.WorstFraction, mark, state)
		for _, f := range cd.Fails {
			fmt.Fprintln(w, "      - "+f)
		}
	}
}

// loaderAccepts parses a proposed entry as a policy file holding it: an
// entry is printed only if the loader that will read it accepts it (a
// record keyed quant "unknown" earned one that every load refused).
func loaderAccepts(entry string) error {
	if _, err := policy.Parse("proposed entry", []byte("schema = 1\n\n"+entry)); err != nil {
		return fmt.Errorf("the records earn no entry the policy loader accepts: %w", err)
	}
	return nil
}

// schedule proposes the schedule entry a load sweep earns, each level's
// bucket recomputed from the raw runs.
func (c *PolicyProposeCmd) schedule(e *Env, rec *record.Record) error {
	p, err := bench.ProposeSchedule(e.Ctx, rec)
	if err != nil {
		if e.Ctx.Err() != nil {
			return fmt.Errorf("policy propose stopped: %w", err)
		}
		return usage(fmt.Errorf("record %s: %w", rec.Name, err), "")
	}
	if c.JSON {
		if err := writeJSON(e.Stdout, p); err != nil {
			return err
		}
	} else {
		w := e.Stdout
		fmt.Fprintf(w, "key: engine=%s drafter=%s capability=%s quant=%s, a load sweep at %s clients\n", rec.Key.Engine, rec.Key.Drafter, rec.Key.Capability, rec.Key.Quant, joinLevels(p.Levels))
		for i, b := range p.Buckets {
			writeClauses(w, "  ", b.At(p.Levels[i]))
		}
		if p.Entry != "" {
			if err := loaderAccepts(p.Entry); err != nil {
				return exitCode(1, err)
			}
			// Why none is earned is the error's alone, as above.
			writeClauses(w, "", p.Why)
			fmt.Fprintf(w, "\n# earned per bucket (docs/schedule.md) by %s\n%s", rec.Name, p.Entry)
		}
	}
	if p.Entry == "" { // Why whole, as the cross-pair rule's above
		why := p.Why
		if !strings.HasPrefix(why, bench.EarnsNoEntry) {
			why = "the record does not earn an entry: " + why
		}
		return exitCode(1, errors.New(why))
	}
	return nil
}

// readRecords reads and validates the records propose is given: each a
// regular file within the record cap (record.ReadFile), a valid record
// (record.Decode: schema, key, widths, counts) before anything is derived.
// A bad one is bad input naming the file and the field.
func readRecords(e *Env, paths []string) ([]*record.Record, error) {
	var recs []*record.Record
	seen := map[[32]byte]string{}
	for _, p := range paths {
		p, err := recordPath(p)
		if err != nil {
			return nil, err
		}
		b, err := record.ReadFile(e.Ctx, p)
		if err == nil {
			// One record given twice (or a copy of it) would count as
			// two model pairs in the cross-pair rule.
			sum := sha256.Sum256(b)
			if first, ok := seen[sum]; ok {
				return nil, usage(fmt.Errorf("record %s is %s again: each record counts as one model pair", quote.Text(p, 0), quote.Text(first, 0)), "give each model pair's record once")
			}
			seen[sum] = p
		}
		if ctxErr := e.Ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("policy propose stopped: %w", ctxErr)
		}
		if err != nil {
			return nil, usage(err, "give the .json twins that `speclaunch bench` wrote")
		}
		r, err := record.Decode(b)
		if err != nil {
			return nil, usage(fmt.Errorf("record %s: %w", p, err), "give a .json twin written by `speclaunch bench`, unedited; re-run the bench if it was changed")
		}
		if r.Name == "" {
			r.Name = strings.TrimSuffix(filepath.Base(p), ".json")
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// recordPath is the .json twin a propose argument names: itself, the twin
// of a .md, or STEM.json of a stem. A path without either extension that
// exists while STEM.json does not is said as what it is: a directory or a
// file of another kind was reported as the missing PATH.json, a file no one
// gave.
func recordPath(p string) (string, error) {
	twin := strings.TrimSuffix(strings.TrimSuffix(p, ".md"), ".json") + ".json"
	if strings.HasSuffix(p, ".md") {
		if _, err := os.Stat(twin); err != nil {
			if _, perr := os.Stat(p); perr == nil {
				return "", usage(fmt.Errorf("record %s has no .json twin (%s)", quote.Text(p, 0), quote.Text(twin, 0)), "give the .json that `speclaunch bench` wrote beside it; the .md is its report")
			}
		}
	}
	if twin != p+".json" {
		return twin, nil
	}
	if _, err := os.Stat(twin); err == nil {
		return twin, nil
	}
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return twin, nil // ReadFile says that STEM.json does not exist
	case fi.IsDir():
		return "", usage(fmt.Errorf("record %s is a directory, not a record", quote.Text(p, 0)), "give the records in it by name, e.g. "+filepath.Join(p, "*.json"))
	}
	return "", usage(fmt.Errorf("record %s is not a .json record", quote.Text(p, 0)), "give the .json twins that `speclaunch bench` wrote (NAME.json, or NAME.md beside it)")
}

// alignRows pads each column to its widest cell, so that a long engine,
// drafter or entry id does not push its row out of line; the last column
// is not padded.
func alignRows(rows [][]string) []string {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	out := make([]string, len(rows))
	for n, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)))
			}
		}
		out[n] = b.String()
	}
	return out
}

// writeClauses prints a summary that bench builds as one line of clauses
// joined by "; " (thousands of characters over many records) as its first
// clause, then one indented line per further clause.
func writeClauses(w io.Writer, indent, text string) {
	for i, c := range strings.Split(text, "; ") {
		if i > 0 {
			c = "    " + c
		}
		fmt.Fprintln(w, indent+c)
	}
}

// entries counts policy entries in words: "1 entry", "3 entries".
func entries(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}
