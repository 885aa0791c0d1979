package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAlignRows(t *testing.T) {
	for _, tc := range []struct {
		name string
		rows [][]string
		want []string
	}{
		{"empty", nil, []string{}},
		{"one row", [][]string{{"a", "b"}}, []string{"a b"}},
		{"columns padded, the last not", [][]string{{"mlxcel", "internal-mtp", "x"}, {"sim", "mtp", "yyyy"}},
			[]string{"mlxcel internal-mtp x", "sim    mtp          yyyy"}},
		{"runes, not bytes", [][]string{{"é", "1"}, {"ab", "2"}}, []string{"é  1", "ab 2"}},
		{"a short row", [][]string{{"aaa", "b", "c"}, {"a"}}, []string{"aaa b c", "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := alignRows(tc.rows)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") || len(got) != len(tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPolicyListAligns: entries whose ids and keys differ in length keep
// their columns in line, as the defaults do (internal-mtp is the longest
// drafter kind).
func TestPolicyListAligns(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "p.toml")
	entry := func(id, capability string) string {
		return "[[entry]]\nid = \"" + id + "\"\nengine = \"llama.cpp\"\ndrafter = \"draft\"\ncapability = \"" + capability +
			"\"\nquant = \"q4_0\"\nwidth = 4\npin = \"b1\"\nrecord = \"docs/benchmark_results/x.md\"\n\n"
	}
	writeFile(t, pol, "schema = 1\n\n"+entry("a-rather-long-entry-id-for-one-host", "9.0")+entry("short", "12.1"))
	var out bytes.Buffer
	if code := MainContext(context.Background(), []string{"policy", "list", "--policy", pol}, policyTOML, &out, &out, nil); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	cols := map[string][]int{}
	for _, l := range strings.Split(out.String(), "\n") {
		marks := []string{" width "} // a default's line
		if strings.Contains(l, "->") {
			marks = []string{"-> width", "quant=", "capability="} // an entry's
		} else if strings.Contains(l, "pin ") || !strings.Contains(l, "(embedded):") {
			continue
		}
		for _, mark := range marks {
			cols[mark] = append(cols[mark], strings.Index(l, mark))
		}
	}
	for mark, at := range cols {
		for _, i := range at {
			if i != at[0] {
				t.Errorf("%q at columns %v, want one column\n%s", mark, at, out.String())
				break
			}
		}
	}
	if len(cols["-> width"]) != 3 || len(cols[" width "]) < 20 {
		t.Errorf("found %v\n%s", cols, out.String())
	}
}

// An entry of a schedule of more than one bucket shows its schedule as
// the startup line says it: a tuned 1-3:16,4+:1 was listed as "-> width
// 16", which hid that it is off at 4+.
func TestPolicyListShowsTheSchedule(t *testing.T) {
	pol := filepath.Join(t.TempDir(), "p.toml")
	writeFile(t, pol, "schema = 1\n\n"+tunedEntryTOML("x", "9.0", "q8_0", "[[1, 3, 16], [4, 0, 1]]", "a"))
	var out bytes.Buffer
	if code := MainContext(context.Background(), []string{"policy", "list", "--policy", pol}, policyTOML, &out, &out, nil); code != 0 {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "tuned-x:") && !strings.HasSuffix(l, "-> width 16 at 1-3, off at 4+") {
			t.Errorf("the tuned entry's line %q, want it to end with the schedule", l)
		}
	}
	if !strings.Contains(out.String(), "tuned-x:") || !strings.Contains(out.String(), "-> width 4 (runner-up 3)") {
		t.Errorf("want the tuned entry and the embedded one's width:\n%s", out.String())
	}
}

// policy list --json and policy check --json speak the snake_case of every
// other --json output; they printed Go's field names (EntryID, Layers).
func TestPolicyJSONKeys(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"policy", "list", "--json"}, []string{`"layers"`, `"defaults"`, `"entries"`, `"id": "gb10-affine-dflash"`, `"capability": "12.1"`}},
		{[]string{"policy", "check", "--json", "--root", filepath.Join("..", "..")}, []string{`"entry_id": "gb10-affine-dflash"`, `"ok": true`}},
	} {
		var out, errb bytes.Buffer
		MainContext(context.Background(), c.args, policyTOML, &out, &errb, nil)
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: no %s in\n%.600s%s", c.args, w, out.String(), errb.String())
			}
		}
		if strings.ContainsAny(strings.SplitN(out.String(), ":", 2)[0], "ABCDEFGHIJKLMNOPQRSTUVWXYZ") {
			t.Errorf("%v: a key in Go's spelling: %.200s", c.args, out.String())
		}
	}
}

// simTuneRecord is a committed record of tune on the sim: the record a
// sim-tuned entry rests on, copied beside a test's tuned layer.
const simTuneRecord = "tuned-mlxcel-5cea7275-180583d4-20261205-083609"

// simTunedLayer writes a tuned layer in cfg/speclaunch holding one entry
// tuned on the sim, and with its record beside it, in records/, as tune
// writes them; it returns the layer's path.
func simTunedLayer(t *testing.T, cfg string, withRecord bool) string {
	t.Helper()
	dir := filepath.Join(cfg, "speclaunch")
	if err := os.MkdirAll(filepath.Join(dir, "records"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".md", ".json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "docs", "benchmark_results", simTuneRecord+ext))
		if err != nil {
			t.Fatal(err)
		}
		if withRecord {
			writeFile(t, filepath.Join(dir, "records", simTuneRecord+ext), string(b))
		}
	}
	layer := filepath.Join(dir, TunedFile)
	writeFile(t, layer, "schema = 1\n"+strings.NewReplacer(`"12.1"`, `"9.0"`, `"affine"`, `"q8_0"`, "records/tune.md", "records/"+simTuneRecord+".md").
		Replace(tunedEntryTOML("sim", "12.1", "affine", "[[1, 3, 16], [4, 0, 1]]", "a")))
	return layer
}

// policy check checks every entry of the merged policy, the user's tuned
// layer's among them, each named with the file it came from, and reads a
// tuned entry's record beside its layer whatever --root and the working
// directory are. It read them under --root: a fresh tune's layer failed
// its own suggested check ("records/….md: missing"), and plain policy
// check left the layer out ("1 entry checked" of 2).
func TestPolicyCheckTunedLayer(t *testing.T) {
	repo := filepath.Join("..", "..")
	for _, c := range []struct {
		name       string
		withRecord bool
		args       func(layer string) []string
		code       int
		want       []string
	}{
		{"plain, the records present", true, func(string) []string { return []string{"--root", repo} }, 0,
			[]string{"ok   tuned-sim  from LAYER:2", "ok   gb10-affine-dflash  from policy.toml (embedded):", "note: the record is simulated, as the entry is", "2 entries checked, 0 failed"}},
		{"the layer named and another root", true, func(l string) []string { return []string{"--policy", l, "--root", t.TempDir()} }, 1,
			[]string{"ok   tuned-sim  from LAYER:2", "FAIL gb10-affine-dflash", "2 entries checked, 1 failed"}},
		{"the layer named by a relative path", true, func(l string) []string { return []string{"--policy", relTo(t, l), "--root", repo} }, 0,
			[]string{"ok   tuned-sim  from " + "REL:2", "2 entries checked, 0 failed"}},
		{"the record missing", false, func(string) []string { return []string{"--root", repo} }, 1,
			[]string{"FAIL tuned-sim  from LAYER:2", "problem: record DIR/records/" + simTuneRecord + ".md: missing; re-run speclaunch tune on this pair", "2 entries checked, 1 failed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := t.TempDir()
			t.Setenv("XDG_CONFIG_HOME", cfg)
			layer := simTunedLayer(t, cfg, c.withRecord)
			var out, errb bytes.Buffer
			code := MainContext(context.Background(), append([]string{"policy", "check"}, c.args(layer)...), policyTOML, &out, &errb, nil)
			if code != c.code {
				t.Errorf("exit %d, want %d\n%s%s", code, c.code, out.String(), errb.String())
			}
			for _, w := range c.want {
				w = strings.NewReplacer("LAYER", layer, "DIR", filepath.Dir(layer), "REL", relTo(t, layer)).Replace(w)
				if !strings.Contains(out.String(), w) {
					t.Errorf("no %q in\n%s%s", w, out.String(), errb.String())
				}
			}
			if strings.Contains(errb.String(), "not checked") {
				t.Errorf("an entry was left out:\n%s", errb.String())
			}
		})
	}
}

// relTo is path relative to the working directory.
func relTo(t *testing.T, path string) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil {
		t.Fatal(err)
	}
	return rel
}
