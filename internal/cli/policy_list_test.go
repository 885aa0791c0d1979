package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/policy"
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

// policy check counts the tuned layer's entries it leaves unchecked in
// words that fit the count: "1 entries not checked" was said of one.
func TestPolicyCheckCountsTunedEntriesLeftOut(t *testing.T) {
	for _, c := range []struct {
		ids  []string
		want string
	}{
		{[]string{"a"}, ": 1 entry not checked (check them with --policy "},
		{[]string{"a", "c"}, ": 2 entries not checked (check them with --policy "},
	} {
		cfg := t.TempDir()
		t.Setenv("XDG_CONFIG_HOME", cfg)
		var es []policy.Entry
		for _, id := range c.ids {
			es = append(es, tunedFixture(t, id))
		}
		if err := writeLayer(filepath.Join(cfg, "speclaunch", TunedFile), es); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		if code := MainContext(context.Background(), []string{"policy", "check", "--root", filepath.Join("..", "..")}, policyTOML, &out, &errb, nil); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", c.ids, code, out.String(), errb.String())
		}
		if !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: stderr %q, want %q in it", c.ids, errb.String(), c.want)
		}
	}
}
