package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/policycheck"
)

// `policy propose` over the two committed H200 Q8_0 records: under the
// bootstrap rule width 6 fails (probability 0.938 against the default in
// pair 1234) and the rule falls back to width 5. The entry it prints parses
// as policy and passes `policy check` against the same records, cost
// tables included.
func TestPolicyProposeH200Q8RoundTrip(t *testing.T) {
	root := filepath.Join("..", "..")
	var recs []string
	for _, p := range []string{"1234", "4321"} {
		recs = append(recs, filepath.Join(root, "docs", "benchmark_results", "h200-llamacpp-d32676d-q8_0-pair"+p+"-2026-11-30.json"))
	}
	out := &syncBuffer{}
	code := MainContext(context.Background(), append([]string{"policy", "propose"}, recs...), policyTOML, out, out, nil)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	text := out.String()
	for _, want := range []string{
		"width 6   0.972  <- runner-up  (fails)\n      - h200-llamacpp-d32676d-q8_0-pair1234-2026-11-30: width 6 beats the default (width 4) with probability 0.938",
		"width 5   0.903  <- chosen  (passes)",
		"fell back past width 6",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	block := text[strings.Index(text, "[[entry]]"):]
	f, err := policy.Parse("proposed.toml", []byte("schema = 1\n"+block))
	if err != nil {
		t.Fatalf("the proposed entry does not parse: %v\n%s", err, block)
	}
	e := f.Entries[0]
	if e.Width != 5 || e.RunnerUp != 6 || len(e.Records) != 2 || len(e.Cost) != 2 {
		t.Errorf("entry %+v", e)
	}
	vs, err := policycheck.Check(context.Background(), policy.Merge(f), func(p string, _ bool) ([]byte, error) { return os.ReadFile(filepath.Join(root, filepath.FromSlash(p))) })
	if err != nil {
		t.Fatal(err)
	}
	if !vs[0].OK {
		t.Errorf("the proposed entry fails its own check: %q", vs[0].Problems)
	}
}

// The shipped policy follows the rule over every committed H200 record of a
// key: propose over all of them earns nothing for Q8_0 (the third pair's
// best width was 2 and no width beats the default with probability >= 0.95
// there), and the embedded policy has no entry for it.
func TestPolicyH200Q8EntryDroppedByTheRule(t *testing.T) {
	recs, err := filepath.Glob(filepath.Join("..", "..", "docs", "benchmark_results", "h200-llamacpp-d32676d-q8_0-pair*.json"))
	if err != nil || len(recs) < 3 {
		t.Fatalf("want the three committed Q8_0 records, found %v (%v)", recs, err)
	}
	out := &syncBuffer{}
	code := MainContext(context.Background(), append([]string{"policy", "propose"}, recs...), policyTOML, out, out, nil)
	if code == 0 || !strings.Contains(out.String(), "the records do not earn an entry") {
		t.Fatalf("exit %d; want no entry earned:\n%s", code, out)
	}
	// Over eight records a width fails for a dozen reasons: one per line,
	// never one line of thousands of characters.
	for _, l := range strings.Split(out.String(), "\n") {
		if len(l) > 400 {
			t.Errorf("a line of %d characters: %.120s...", len(l), l)
		}
	}
	f, err := policy.Parse("policy.toml", policyTOML)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range f.Entries {
		if e.Key.Engine == key.LlamaCpp && e.Key.Quant == key.QuantQ8_0 {
			t.Errorf("the embedded policy keeps %s (width %d), which its records no longer earn", e.ID, e.Width)
		}
	}
}

// `policy propose --json` exits as the text output does (1 when no entry is
// earned; it exited 0 after printing the JSON) and its keys are snake_case
// like every other --json output (they were Go's field names).
func TestPolicyProposeJSON(t *testing.T) {
	results, q8 := committedQ8(t)
	for _, tc := range []struct {
		name    string
		records []string
		code    int
		want    map[string]any // top-level keys and their values
	}{
		{"earned", []string{
			filepath.Join(results, "h200-llamacpp-d32676d-q8_0-pair1234-2026-11-30.json"),
			filepath.Join(results, "h200-llamacpp-d32676d-q8_0-pair4321-2026-11-30.json"),
		}, 0, map[string]any{"width": 5.0, "runner_up": 6.0, "eligible": true}},
		{"none earned", q8, 1, map[string]any{"eligible": false, "entry": ""}},
		{"a simulated load sweep", []string{filepath.Join(results, "tuned-mlxcel-5cea7275-180583d4-20261205-083609.json")}, 1, map[string]any{"entry": ""}},
	} {
		var stdout, stderr bytes.Buffer
		code := MainContext(context.Background(), append([]string{"policy", "propose", "--json"}, tc.records...), policyTOML, &stdout, &stderr, nil)
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d; stderr:\n%s", tc.name, code, tc.code, stderr.String())
		}
		var got map[string]any
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
			t.Errorf("%s: stdout is not JSON (%v):\n%s", tc.name, err, stdout.String())
			continue
		}
		for k, v := range tc.want {
			if got[k] != v {
				t.Errorf("%s: %q is %v, want %v", tc.name, k, got[k], v)
			}
		}
		if _, ok := got["why"]; !ok {
			t.Errorf("%s: no \"why\" key", tc.name)
		}
		if entry, _ := got["entry"].(string); (tc.code == 0) != strings.HasPrefix(entry, "[[entry]]") {
			t.Errorf("%s: exit %d with entry %q", tc.name, code, entry)
		}
		if bad := goCasedKeys(got, ""); len(bad) > 0 {
			t.Errorf("%s: keys not in snake_case: %v", tc.name, bad)
		}
	}
}

// goCasedKeys lists the object keys under v (a decoded JSON value) that
// hold an upper-case letter.
func goCasedKeys(v any, at string) []string {
	var bad []string
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if strings.ToLower(k) != k {
				bad = append(bad, at+k)
			}
			bad = append(bad, goCasedKeys(e, at+k+".")...)
		}
	case []any:
		for _, e := range v {
			bad = append(bad, goCasedKeys(e, at)...)
		}
	}
	slices.Sort(bad)
	return slices.Compact(bad)
}

// Why no entry is earned is speclaunch's own text: the error prints it
// whole (it was cut at 160 bytes, mid-word). What a record says of itself
// inside it (its name) is quoted and bounded where the reason is built.
func TestPolicyProposeSaysWhyWhole(t *testing.T) {
	results, q8 := committedQ8(t)
	// a record whose name would forge a line and bury the error
	forged := editedRecord(t, q8[0], func(rec map[string]any) {
		rec["name"] = "x\nspeclaunch: forged line " + strings.Repeat("a", 100_000)
	})
	// a simulated sweep, interrupted: two reasons, 280 bytes
	partial := editedRecord(t, filepath.Join(results, "tuned-mlxcel-5cea7275-180583d4-20261205-083609.json"), func(rec map[string]any) {
		rec["complete"] = false
	})
	q4 := filepath.Join(results, "h200-llamacpp-d32676d-q4_0-pair1234-2026-11-30.json")
	for _, tc := range []struct {
		name    string
		records []string
		code    int
		want    []string // in the error, unwrapped
	}{
		{"ten pairs", q8, 1, []string{"over 10 record(s)", "(median ratio 1.057, 95% interval 0.935-1.243); no other width passes either (6 ranked)"}},
		{"a simulated load sweep, interrupted", []string{partial}, 1, []string{"the record is simulated: a record from the sim engine never backs an entry; measure on a real engine and GPU; " +
			"the record is incomplete (the bench was interrupted); re-run it to completion"}},
		{"a record's own name", []string{forged, q4}, 2, []string{`name: is 100026 bytes long, above the 255 it may hold`}},
	} {
		var stdout, stderr bytes.Buffer
		code := MainContext(context.Background(), append([]string{"policy", "propose"}, tc.records...), policyTOML, &stdout, &stderr, nil)
		got := strings.ReplaceAll(stderr.String(), "\n  ", " ") // unwrapped
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d", tc.name, code, tc.code)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: the error lacks %q:\n%s", tc.name, w, stderr.String())
			}
		}
		if strings.Contains(stderr.String(), "\nspeclaunch: forged") || stderr.Len() > 4000 {
			t.Errorf("%s: a record's name forged a line or buried the error (%d bytes)", tc.name, stderr.Len())
		}
	}
}

// editedRecord writes the record at path, edited, to a file of the test's
// and returns its path.
func editedRecord(t *testing.T, path string, edit func(rec map[string]any)) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(out, editedJSON(t, path, edit), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// Why no entry is earned is on stderr alone, with exit 1 (docs/policy.md);
// the figures stay on stdout. It was printed on stdout too, then again as
// the error. An entry earned keeps its reason on stdout, above it.
func TestPolicyProposeSaysWhyOnStderrOnly(t *testing.T) {
	results, q8 := committedQ8(t)
	for _, tc := range []struct {
		name    string
		records []string
		why     string // the reason's first words
		figures string // a line of the figures, on stdout
	}{
		{"the cross-pair rule", q8, "width 5 keeps at least 0.90", "widths ranked by their worst fraction"},
		{"a load sweep", []string{filepath.Join(results, "tuned-mlxcel-5cea7275-180583d4-20261205-083609.json")}, "the record is simulated", "4 clients: width 1"},
	} {
		var stdout, stderr bytes.Buffer
		code := MainContext(context.Background(), append([]string{"policy", "propose"}, tc.records...), policyTOML, &stdout, &stderr, nil)
		if code != 1 || !strings.Contains(stderr.String(), tc.why) || !strings.Contains(stdout.String(), tc.figures) {
			t.Errorf("%s: exit %d, want 1, the reason on stderr and the figures on stdout:\n%s---\n%s", tc.name, code, stdout.String(), stderr.String())
		}
		if strings.Contains(stdout.String(), tc.why) {
			t.Errorf("%s: the reason is on stdout too:\n%s", tc.name, stdout.String())
		}
	}
	// Earned, the reason is the entry's, on stdout (TestPolicyProposeH200Q8RoundTrip's pairs).
	earned := []string{
		filepath.Join(results, "h200-llamacpp-d32676d-q8_0-pair1234-2026-11-30.json"),
		filepath.Join(results, "h200-llamacpp-d32676d-q8_0-pair4321-2026-11-30.json"),
	}
	var stdout, stderr bytes.Buffer
	if code := MainContext(context.Background(), append([]string{"policy", "propose"}, earned...), policyTOML, &stdout, &stderr, nil); code != 0 || !strings.Contains(stdout.String(), "fell back past width 6") || !strings.Contains(stdout.String(), "[[entry]]") {
		t.Errorf("an entry earned: exit %d:\n%s---\n%s", code, stdout.String(), stderr.String())
	}
}

// committedQ8 is the folder of the committed records and its H200 Q8_0
// records, which the cross-pair rule reads.
func committedQ8(t *testing.T) (string, []string) {
	t.Helper()
	results := filepath.Join("..", "..", "docs", "benchmark_results")
	q8, err := filepath.Glob(filepath.Join(results, "h200-llamacpp-d32676d-q8_0-pair*.json"))
	if err != nil || len(q8) < 3 {
		t.Fatalf("want the committed Q8_0 records, found %v (%v)", q8, err)
	}
	return results, q8
}
