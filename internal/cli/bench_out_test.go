package cli

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/bench"
	"github.com/speclaunch/speclaunch/internal/record"
)

// TestBenchOutCheckedFirst: an output path that cannot be written is bad
// input before any engine starts (a sweep takes hours on real hardware),
// naming where the path came from: a directory as the stem and a missing
// directory (made by nothing) among them.
func TestBenchOutCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "p.toml")
	writeFile(t, prof, "[engine]\nname = \"sim\"\n\n[bench]\nout = \"/dev/null/rec\"\n")
	base := []string{"bench", "--engine", "sim", "-m", "t", "-md", "d", "--widths", "2", "--rounds", "3"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"flag", []string{"--out", "/dev/null/x"}, "flag --out: the record cannot be written to /dev/null/x: /dev/null is not a directory"},
		{"profile", []string{"--profile", prof}, "profile " + prof + ":5: the record cannot be written to /dev/null/rec"},
		{"a directory", []string{"--out", dir}, "flag --out: the record cannot be written to " + dir + ": " + dir + " is a directory, and a record is three files named from a stem; give --out (profile bench.out) a file stem in an existing directory you can write to, e.g. DIR/run1"},
		{"a trailing slash", []string{"--out", dir + "/"}, "flag --out: the record cannot be written to " + dir + "/: " + dir + "/ names a directory"},
		{"a missing directory", []string{"--out", filepath.Join(dir, "no", "such", "x")}, "directory " + filepath.Join(dir, "no", "such") + " does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A safety net only: with the check in place the command returns at once.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := MainContext(ctx, append(base, tc.args...), policyTOML, &stdout, &stderr, nil)
			if got := strings.ReplaceAll(stderr.String(), "\n  ", " "); code != 2 || !strings.Contains(got, tc.want) { // unwrapped
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), tc.want)
			}
			if strings.Contains(stderr.String(), "bench starting") {
				t.Errorf("an engine started before the check: %s", stderr.String())
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 1 {
				t.Errorf("the check left %v, want only the profile", left)
			}
		})
	}
}

// bench's stdout says what the record earns in a policy entry, in the
// words of the record's "Policy entry" section (bench.EntryVerdict), and
// the entry when it earns one. It said only the ranking: a simulated or
// incomplete record's terminal never said that it earns nothing, and a
// load sweep's never showed its entry.
func TestWriteVerdict(t *testing.T) {
	const entry = "[[entry]]\nid = \"x\"\n"
	for _, tc := range []struct {
		name string
		rec  record.Record
		want string
	}{
		{"simulated", record.Record{Verdict: record.Verdict{Why: "width 4 ran 70.5 tok/s.", NoEntryReason: "the record is simulated: a record from the sim engine never backs an entry"}},
			"width 4 ran 70.5 tok/s.\nNo policy entry is earned: the record is simulated: a record from the sim engine never backs an entry.\n"},
		{"an arm failed, interrupted", record.Record{Arms: []record.Arm{{Label: "width 8", Status: record.StatusFailed, StatusReason: "start failed"}},
			Verdict: record.Verdict{Why: "width 4 ran 70.5 tok/s.", NoEntryReason: "the record is incomplete (the bench was interrupted)"}},
			"width 4 ran 70.5 tok/s.\nfailed, not measured: width 8 (start failed)\nNo policy entry is earned: the record is incomplete (the bench was interrupted).\n"},
		{"an entry", record.Record{Verdict: record.Verdict{Why: "width 4 ran 70.5 tok/s.", EarnsEntry: true, Entry: entry}},
			"width 4 ran 70.5 tok/s.\nThis record earns a policy entry; after committing the record, add it to policy.toml:\n\n" + entry},
		{"a load sweep's schedule, simulated", record.Record{Levels: []record.Level{{Concurrency: 1}}, Verdict: record.Verdict{Why: "the levels earn the schedule 1+:4 (width 4)", NoEntryReason: "the record is simulated"}},
			"the levels earn the schedule 1+:4 (width 4)\nIt backs no embedded policy entry: the record is simulated. A tuned user layer may still carry it (docs/schedule.md).\n"},
		{"a load sweep's entry", record.Record{Levels: []record.Level{{Concurrency: 1}}, Verdict: record.Verdict{Why: "the levels earn the schedule 1+:4 (width 4)", EarnsEntry: true, Entry: entry}},
			"the levels earn the schedule 1+:4 (width 4)\nThis record earns a policy entry; after committing the record, add it to policy.toml:\n\n" + entry},
		{"a load sweep, no schedule", record.Record{Levels: []record.Level{{Concurrency: 1}}, Verdict: record.Verdict{Why: "no schedule earned: no level measured"}},
			"no schedule earned: no level measured\n"},
	} {
		var out bytes.Buffer
		writeVerdict(&out, &tc.rec)
		if out.String() != tc.want {
			t.Errorf("%s:\n%q, want\n%q", tc.name, out.String(), tc.want)
		}
		// the record's markdown says it in the same words
		line := strings.Split(strings.TrimSpace(tc.want), "\n")
		if md := string(bench.RenderMarkdown(&tc.rec)); !strings.Contains(md, line[len(line)-1]) {
			t.Errorf("%s: the record's markdown does not say %q:\n%s", tc.name, line[len(line)-1], md)
		}
	}
}

// A bench none of whose arms measured anything exits 1, its record kept:
// it exited 0 after "nothing to compare against", which a script reads as
// a measurement. One arm measured, on one level or another, is a record.
func TestMeasuredNothing(t *testing.T) {
	failed, ok := record.Arm{Status: record.StatusFailed}, record.Arm{Status: record.StatusOK}
	for _, tc := range []struct {
		name string
		rec  record.Record
		fail bool
	}{
		{"every arm failed", record.Record{Arms: []record.Arm{failed, failed}}, true},
		{"one arm measured", record.Record{Arms: []record.Arm{failed, ok}}, false},
		{"a sweep, every level failed", record.Record{Levels: []record.Level{{Arms: []record.Arm{failed}}, {Arms: []record.Arm{failed}}}}, true},
		{"a sweep, one level measured", record.Record{Levels: []record.Level{{Arms: []record.Arm{failed}}, {Arms: []record.Arm{ok}}}}, false},
	} {
		err := measuredNothing(&tc.rec, "out/r")
		var ee *exitError
		if tc.fail != (err != nil) || tc.fail && (!errors.As(err, &ee) || ee.Code != 1 || !strings.Contains(err.Error(), "out/r.md says why")) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
