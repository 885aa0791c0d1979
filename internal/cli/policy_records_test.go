package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const gb10Record = "draft-block-width-default-gb10-2026-09-20"

// gb10JSON is the committed GB10 record's .json after edit has changed it.
func gb10JSON(t *testing.T, edit func(rec map[string]any)) []byte {
	t.Helper()
	return editedJSON(t, filepath.Join("..", "..", "docs", "benchmark_results", gb10Record+".json"), edit)
}

// editedJSON is the JSON file at path after edit has changed it.
func editedJSON(t *testing.T, path string, edit func(rec map[string]any)) []byte {
	t.Helper()
	js, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(js, &rec); err != nil {
		t.Fatal(err)
	}
	edit(rec)
	if js, err = json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
	return js
}

// gb10Copy copies the committed GB10 record into a fresh root, its .json
// edited (gb10JSON), and returns the root.
func gb10Copy(t *testing.T, edit func(rec map[string]any)) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "docs", "benchmark_results")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join("..", "..", "docs", "benchmark_results", gb10Record+".md"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{gb10Record + ".md": md, gb10Record + ".json": gb10JSON(t, edit)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// armNamed returns the decoded arm whose label starts with prefix.
func armNamed(t *testing.T, rec map[string]any, prefix string) map[string]any {
	t.Helper()
	for _, a := range rec["arms"].([]any) {
		if arm := a.(map[string]any); strings.HasPrefix(arm["label"].(string), prefix) {
			return arm
		}
	}
	t.Fatalf("no arm %q", prefix)
	return nil
}

// fiveSlowRuns are five measured runs at 58.0-58.3 tok/s: below classic's
// max of 58.71, while the arm's stored stats still say 67-68.
func fiveSlowRuns() []any {
	var runs []any
	for i, v := range []float64{58.0, 58.1, 58.3, 58.2, 58.05} {
		runs = append(runs, map[string]any{"round": i + 1, "phase": "measured", "tok_per_s": v, "wall_s": 200 / v, "completion_tokens": 200})
	}
	return runs
}

// A copy of the GB10 record whose width-4 arm was given slow raw runs
// under its stored stats fails `policy check`, naming the arm and field;
// the unedited copy passes.
func TestPolicyCheckTamperedGB10Record(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, rec map[string]any)
		code int
		want []string
	}{
		{name: "unedited", edit: func(*testing.T, map[string]any) {}, code: 0,
			want: []string{"ok   gb10-affine-dflash", "the record keeps no raw runs", "1 entry checked, 0 failed"}},
		{name: "width arm given slow runs", code: 1, edit: func(t *testing.T, rec map[string]any) {
			armNamed(t, rec, "width 4")["runs"] = fiveSlowRuns()
		}, want: []string{"FAIL gb10-affine-dflash",
			`problem: arm "width 4 (flag)": stored stats.n 3 (recomputed 5), stats.min 68.04 (recomputed 58)`,
			`problem: width 4 (arm "width 4 (flag)") does not beat classic with disjoint ranges: its min 58.00 is not above classic's max 58.71`,
			"1 entry checked, 1 failed"}},
		{name: "default arm at width 4 given slow runs", code: 1, edit: func(t *testing.T, rec map[string]any) {
			armNamed(t, rec, "default = 4")["runs"] = fiveSlowRuns()
		}, want: []string{"FAIL gb10-affine-dflash", `problem: arm "default = 4`, "stats.min 67.22 (recomputed 58)", "1 entry checked, 1 failed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := gb10Copy(t, func(rec map[string]any) { tc.edit(t, rec) })
			out := &syncBuffer{}
			code := MainContext(context.Background(), []string{"policy", "check", "--root", root}, policyTOML, out, out, nil)
			if code != tc.code {
				t.Errorf("exit %d, want %d:\n%s", code, tc.code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// `policy propose` validates a record before deriving anything: a record
// that is not one, or whose best arm runs a width speculation never runs,
// is bad input (exit 2) naming the file and the field, and nothing is
// printed as an entry.
func TestPolicyProposeRefusesInvalidRecords(t *testing.T) {
	gb10 := func(edit func(rec map[string]any)) []byte { return gb10JSON(t, edit) }
	width := func(w float64) []byte {
		return gb10(func(rec map[string]any) { armNamed(t, rec, "width 3")["width"] = w })
	}
	manyRuns := gb10(func(rec map[string]any) {
		var runs []any
		for i := range 1001 { // one above the bound: 80,000 took 2-11 s to build
			runs = append(runs, map[string]any{"round": i + 1, "phase": "measured", "tok_per_s": 70.0, "wall_s": 200 / 70.0, "completion_tokens": 200})
		}
		armNamed(t, rec, "width 3")["runs"] = runs
	})
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty object", []byte("{}"), "r.json: schema: is 0"},
		{"null", []byte("null"), "r.json: (top level): a record is a JSON object"},
		{"width 1", width(1), "r.json: arms[3].width: 1 is outside 2 to 256"},
		{"width 10^9", width(1e9), "r.json: arms[3].width: 1000000000 is outside 2 to 256"},
		{"no key", gb10(func(rec map[string]any) { delete(rec, "key") }), "r.json: key.engine: is empty"},
		{"1,001 runs in an arm", manyRuns, "r.json: arms[3].runs: holds 1001 runs, above the 1000 an arm may hold"},
		// Issue 33: figures no measurement gives were ranked (exit 1) or
		// proposed as an entry policy check refused.
		{"a cost of -5 ms", gb10(func(rec map[string]any) {
			armNamed(t, rec, "width 3")["cost"] = map[string]any{"ms_per_cycle": -5.0}
		}), "r.json: arms[3].cost.ms_per_cycle: is -5"},
		{"a negative count", gb10(func(rec map[string]any) {
			armNamed(t, rec, "width 3")["runs"] = []any{map[string]any{"round": 1, "phase": "measured", "tok_per_s": 70.0, "completion_tokens": -3}}
		}), "r.json: arms[3].runs[0].completion_tokens: is -3: a count is 0 or more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "r.json")
			if err := os.WriteFile(p, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			out := &syncBuffer{}
			code := MainContext(context.Background(), []string{"policy", "propose", p}, policyTOML, out, out, nil)
			if code != 2 || !strings.Contains(out.String(), tc.want) || strings.Contains(out.String(), "[[entry]]") {
				t.Errorf("exit %d, want 2 and %q:\n%s", code, tc.want, out)
			}
		})
	}
}

// A signal (the context ending) stops `policy propose` with exit 130, not
// an entry, and not as bad input (evidence's TestCompareCancelled stops the
// bootstrap itself mid-way).
func TestPolicyProposeCancelled(t *testing.T) {
	rec := filepath.Join("..", "..", "docs", "benchmark_results", "h200-llamacpp-d32676d-q8_0-pair1234-2026-11-30.json")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := &syncBuffer{}
	code := MainContext(ctx, []string{"policy", "propose", rec}, policyTOML, out, out, nil)
	if code != 130 || !strings.Contains(out.String(), "policy propose stopped: interrupted") || strings.Contains(out.String(), "[[entry]]") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// Issue 33: propose printed entries its own loader refused. A record of a
// key no entry may have (quant "unknown") earns nothing printed, with the
// loader's reason on stderr; the same record given twice is bad input, not
// two model pairs.
func TestPolicyProposeOnlyWhatTheLoaderAccepts(t *testing.T) {
	dir := t.TempDir()
	var recs []string
	for _, pair := range []string{"1234", "4321"} {
		name := "h200-llamacpp-d32676d-q8_0-pair" + pair + "-2026-11-30"
		js, err := os.ReadFile(filepath.Join("..", "..", "docs", "benchmark_results", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var rec map[string]any
		if err := json.Unmarshal(js, &rec); err != nil {
			t.Fatal(err)
		}
		rec["key"].(map[string]any)["quant"] = "unknown"
		js, _ = json.Marshal(rec)
		p := filepath.Join(dir, name+".json")
		os.WriteFile(p, js, 0o644)
		recs = append(recs, p)
	}
	var o, e syncBuffer
	code := MainContext(context.Background(), append([]string{"policy", "propose"}, recs...), policyTOML, &o, &e, nil)
	if code != 1 || strings.Contains(o.String(), "[[entry]]") || !strings.Contains(e.String(), `quant "unknown" cannot key an entry`) {
		t.Errorf("quant unknown: exit %d\nstdout:\n%s\nstderr:\n%s", code, &o, &e)
	}
	o, e = syncBuffer{}, syncBuffer{}
	code = MainContext(context.Background(), []string{"policy", "propose", recs[0], recs[0]}, policyTOML, &o, &e, nil)
	if code != 2 || strings.Contains(o.String(), "[[entry]]") || !strings.Contains(e.String(), "each record counts as one model pair") {
		t.Errorf("a record twice: exit %d\nstdout:\n%s\nstderr:\n%s", code, &o, &e)
	}
}

// `policy propose` names the path as given when it is no record: a
// directory, or a file that is not a .json twin, was reported as the
// missing PATH.json (TestPolicyProposeRefusesInvalidRecords has the
// records that are not valid).
func TestPolicyProposeNamesThePathGiven(t *testing.T) {
	dir := t.TempDir()
	txt, md := filepath.Join(dir, "rec.txt"), filepath.Join(dir, "only.md")
	for _, f := range []string{txt, md} {
		if err := os.WriteFile(f, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, path, want, hint string
	}{
		{"a directory", dir, "record " + dir + " is a directory, not a record", "give the records in it by name, e.g. " + filepath.Join(dir, "*.json")},
		{"a file of another kind", txt, "record " + txt + " is not a .json record", "give the .json twins that `speclaunch bench` wrote (NAME.json, or NAME.md beside it)"},
		{"a report without its .json", md, "record " + md + " has no .json twin (" + filepath.Join(dir, "only.json") + ")", "give the .json that `speclaunch bench` wrote beside it"},
		{"a stem of nothing", filepath.Join(dir, "none"), "record " + filepath.Join(dir, "none.json") + ": no such file", "give the .json twins"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &syncBuffer{}
			code := MainContext(context.Background(), []string{"policy", "propose", tc.path}, policyTOML, out, out, nil)
			if got := strings.ReplaceAll(out.String(), "\n  ", " "); code != 2 || !strings.Contains(got, "error: "+tc.want) || !strings.Contains(got, "hint: "+tc.hint) { // unwrapped
				t.Errorf("exit %d, want 2, %q and the hint %q:\n%s", code, tc.want, tc.hint, out)
			}
		})
	}
}
