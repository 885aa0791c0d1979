package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

const validEntry = `[[entry]]
id = "gb10-affine-dflash"
engine = "mlxcel"
drafter = "dflash"
capability = "12.1"
quant = "affine"
width = 4
runner_up = 3
pin = "mlx 81ba1c6a"
record = "docs/benchmark_results/x.md"
note = "n"
`

func TestParseValid(t *testing.T) {
	src := "schema = 1\n\n[[default]]\nengine = \"mlxcel\"\ndrafter = \"dflash\"\nwidth = 16\nnote = \"mirror\"\n\n" + validEntry
	f, err := Parse("p.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "p.toml" || f.Schema != 1 || len(f.Defaults) != 1 || len(f.Entries) != 1 {
		t.Fatalf("got %+v", f)
	}
	d := f.Defaults[0]
	if d != (Default{Engine: key.MLXCEL, Drafter: key.DFlash, Width: 16, Note: "mirror", Origin: "p.toml:3"}) {
		t.Errorf("default = %+v", d)
	}
	want := Entry{
		ID:       "gb10-affine-dflash",
		Key:      key.Key{Engine: key.MLXCEL, Drafter: key.DFlash, Capability: key.Capability{Major: 12, Minor: 1}, Quant: key.QuantAffine},
		Width:    4,
		Pin:      "mlx 81ba1c6a",
		Record:   "docs/benchmark_results/x.md",
		Records:  []string{"docs/benchmark_results/x.md"},
		RunnerUp: 3,
		Note:     "n",
		Origin:   "p.toml:9",
	}
	if !reflect.DeepEqual(f.Entries[0], want) {
		t.Errorf("entry = %+v\nwant   %+v", f.Entries[0], want)
	}
}

func TestParseAcceptsSpellingsAndInlineTables(t *testing.T) {
	src := `schema = 1
default = [{engine = "llama-server", drafter = "draft-simple", width = 4}]
entry = [{id = "a", engine = "llama.cpp", drafter = "draft-dflash", capability = "9.0", quant = "Q4_K_M", width = 6, pin = "llama.cpp d32676d", record = "r.md"}]
`
	f, err := Parse("p.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if d := f.Defaults[0]; d.Engine != key.LlamaCpp || d.Drafter != key.Draft || d.Origin != "p.toml:2" {
		t.Errorf("default = %+v", d)
	}
	if e := f.Entries[0]; e.Key.Drafter != key.DFlash || e.Key.Quant != key.QuantQ4_K || e.Origin != "p.toml:3" || e.RunnerUp != 0 {
		t.Errorf("entry = %+v", e)
	}
}

// tunedKeys make validEntry a tuned entry: the keys tune writes.
var tunedKeys = "tuned = \"2026-12-05\"\ntarget_sha256 = \"" + strings.Repeat("a", 64) + "\"\ndraft_sha256 = \"" + strings.Repeat("b", 64) + "\"\n"

// entryWith returns a file whose single entry has line `k = v` replaced (or
// removed when v is empty, or added when k is new).
func entryWith(k, v string) string {
	var b strings.Builder
	b.WriteString("schema = 1\n\n")
	found := false
	for _, line := range strings.Split(strings.TrimSuffix(validEntry, "\n"), "\n") {
		if strings.HasPrefix(line, k+" = ") {
			found = true
			if v != "" {
				b.WriteString(k + " = " + v + "\n")
			}
			continue
		}
		b.WriteString(line + "\n")
	}
	if !found {
		b.WriteString(k + " = " + v + "\n")
	}
	return b.String()
}

func TestParseRejects(t *testing.T) {
	// validEntry starts on line 3; its keys follow in order.
	cases := []struct {
		name string
		src  string
		line int
		msg  string
	}{
		{"syntax", "schema = 1\nwidth = = 4\n", 2, "invalid TOML"},
		{"duplicate toml key", "schema = 1\nschema = 1\n", 2, "invalid TOML"},
		{"unclosed header", "schema = 1\n[[default]\nwidth = 4\n", 2, "invalid TOML"},   // the decoder said 3: the newline it stopped at
		{"after a byte-order mark", "\xef\xbb\xbfschema = 1\n= 4\n", 2, "invalid TOML"}, // the decoder drops the mark before it counts
		{"bad escape in a multi-line string", "schema = 1\n[[default]]\nnote = \"\"\"\nfine\n\\q\n\"\"\"\n", 5, "invalid TOML"},
		{"a control character at a line's start", "schema = 1\n\n\x01x\n", 3, "control characters"}, // it was said on line 2
		{"missing schema", "[[default]]\nengine = \"mlxcel\"\ndrafter = \"dflash\"\nwidth = 16\n", 1, "missing schema"},
		{"empty file", "", 1, "missing schema"},
		{"UTF-16 byte-order mark", "\xff\xfeschema = 1\n", 1, "UTF-16 byte-order mark (bytes FF FE); TOML files are UTF-8: save the file as UTF-8"},
		{"schema 2", "schema = 2\n", 1, "schema 2 is not supported"},
		{"schema string", "schema = \"1\"\n", 1, "must be an integer, not a string"},
		{"unknown top key", "schema = 1\nwidth = 4\n", 2, `unknown key "width" at the top level`},
		{"unknown top table", "schema = 1\n[[entries]]\nid = \"x\"\n", 2, `unknown key "entries"`},
		{"default not array", "schema = 1\n[default]\nengine = \"mlxcel\"\n", 2, "write [[default]]"},
		{"default array of ints", "schema = 1\ndefault = [1, 2]\n", 2, "an element is a integer"},
		{"unknown default key", "schema = 1\n[[default]]\nengine = \"mlxcel\"\ndrafter = \"dflash\"\nwidth = 16\nquant = \"affine\"\n", 6, `unknown key "quant" in [[default]]`},
		{"default missing width", "schema = 1\n[[default]]\nengine = \"mlxcel\"\ndrafter = \"dflash\"\n", 2, "missing width"},
		{"default width 1", "schema = 1\n[[default]]\nengine = \"mlxcel\"\ndrafter = \"dflash\"\nwidth = 1\n", 5, "widths 0 and 1 disable speculation"},
		{"default width 0", "schema = 1\n[[default]]\nengine = \"mlxcel\"\ndrafter = \"dflash\"\nwidth = 0\n", 5, "widths 0 and 1 disable speculation"},
		{"default width negative", "schema = 1\n[[default]]\nengine = \"mlxcel\"\ndrafter = \"dflash\"\nwidth = -3\n", 5, "below 2"},
		{"default unknown engine", "schema = 1\n[[default]]\nengine = \"tgi\"\ndrafter = \"dflash\"\nwidth = 4\n", 3, `unknown engine "tgi"`},
		{"default engine not string", "schema = 1\n[[default]]\nengine = 7\ndrafter = \"dflash\"\nwidth = 4\n", 3, "engine must be a string, not a integer"},
		{"default drafter unsupported", "schema = 1\n[[default]]\nengine = \"mlxcel\"\ndrafter = \"eagle3\"\nwidth = 4\n", 4, "not supported by engine mlxcel"},
		{"duplicate default", "schema = 1\n[[default]]\nengine = \"mlxcel\"\ndrafter = \"dflash\"\nwidth = 16\n[[default]]\nengine = \"mlxcel-server\"\ndrafter = \"dflash\"\nwidth = 8\n", 6, "duplicate [[default]] for engine mlxcel drafter dflash (first at p.toml:2)"},
		{"entry unknown key", entryWith("widht", "4"), 14, `unknown key "widht" in [[entry]]`},
		{"entry missing id", entryWith("id", ""), 3, "missing id"},
		{"entry empty id", entryWith("id", `""`), 4, `id "" must be`},
		{"entry bad id", entryWith("id", `"has space"`), 4, "id \"has space\" must be"},
		{"entry unknown engine", entryWith("engine", `"ollama"`), 5, `unknown engine "ollama"`},
		{"entry unknown drafter", entryWith("drafter", `"medusa"`), 6, `unknown drafter kind "medusa"`},
		{"entry on sim", entryWith("engine", `"sim"`), 5, `cannot name engine "sim"`},
		// internal-mtp is detected on mlxcel, but llama.cpp never runs it.
		{"entry internal-mtp on llama.cpp", strings.Replace(entryWith("engine", `"llama.cpp"`), `drafter = "dflash"`, `drafter = "internal-mtp"`, 1), 6, "not user-selectable"},
		{"entry missing capability", entryWith("capability", ""), 3, "missing capability"},
		{"entry sm capability", entryWith("capability", `"sm_121"`), 7, `capability "sm_121" must be written MAJOR.MINOR`},
		{"entry malformed capability", entryWith("capability", `"twelve"`), 7, "must be written MAJOR.MINOR"},
		{"entry capability padded", entryWith("capability", `" 12.1"`), 7, "must be written MAJOR.MINOR"},
		{"entry capability out of range", entryWith("capability", `"100.0"`), 7, `capability: "100.0" is out of range: the major version is 1 to 99`},
		{"entry capability 0", entryWith("capability", `"0.0"`), 7, `"0.0" is out of range`},
		{"entry capability integer", entryWith("capability", `12`), 7, "capability must be a string, not a integer"},
		{"entry capability float", entryWith("capability", `12.1`), 7, "capability must be a string, not a float"},
		{"entry unknown quant", entryWith("quant", `"gptq"`), 8, `unknown quantization "gptq"`},
		{"entry quant unknown", entryWith("quant", `"unknown"`), 8, `quant "unknown" cannot key an entry`},
		{"entry missing width", entryWith("width", ""), 3, "[[entry]] is missing width or schedule: give the verify-block width, 2 to 256, e.g. width = 4, or the width by load, e.g. schedule = [[1, 1, 6], [2, 0, 4]]"},
		{"entry width 1", entryWith("width", "1"), 9, "widths 0 and 1 disable speculation"},
		{"entry width 257", entryWith("width", "257"), 9, "above 256"},
		{"entry width float", entryWith("width", "4.0"), 9, "must be an integer, not a float"},
		{"entry width string", entryWith("width", `"4"`), 9, "must be an integer, not a string"},
		{"entry width huge", entryWith("width", "9223372036854775807"), 9, "above 256"},
		{"entry runner_up 1", entryWith("runner_up", "1"), 10, "runner_up 1 is below 2"},
		{"entry runner_up equals width", entryWith("runner_up", "4"), 10, "runner_up 4 equals width"},
		{"entry missing pin", entryWith("pin", ""), 3, "missing pin"},
		{"entry blank pin", entryWith("pin", `"  "`), 11, "pin is empty"},
		{"entry pin bool", entryWith("pin", `true`), 11, "pin must be a string, not a boolean"},
		{"entry missing record", entryWith("record", ""), 3, "missing record"},
		{"entry record not md", entryWith("record", `"docs/x.json"`), 12, "must be the repository-relative path of the record's .md"},
		{"entry record absolute", entryWith("record", `"/abs/x.md"`), 12, "repository-relative"},
		{"entry record escapes", entryWith("record", `"../x.md"`), 12, "repository-relative"},
		{"entry record example", entryWith("record", `"x.json"`), 12, `e.g. "docs/benchmark_results/<name>.md"`},
		// A tuned entry's record is relative to its layer, where tune
		// writes records/: the example is one of those, not the repository's.
		{"tuned entry record not md", entryWith("record", `"records/x.json"`) + tunedKeys, 12, `record "records/x.json" must be the path of the record's .md relative to this file's directory, e.g. "records/<name>.md"`},
		{"tuned entry record absolute", entryWith("record", `"/abs/x.md"`) + tunedKeys, 12, `relative to this file's directory, e.g. "records/<name>.md"`},
		{"tuned entry missing record", entryWith("record", "") + tunedKeys, 3, `a tuned entry names the record speclaunch tune wrote beside this file, e.g. record = "records/<name>.md"`},
		{"entry note table", entryWith("note", `{a = 1}`), 13, "note must be a string, not a table"},
		{"duplicate id", "schema = 1\n" + validEntry + strings.Replace(validEntry, `"12.1"`, `"9.0"`, 1), 14, `duplicate entry id "gb10-affine-dflash" (first at p.toml:2)`},
		{"duplicate key", "schema = 1\n" + validEntry + strings.Replace(validEntry, `"gb10-affine-dflash"`, `"other"`, 1), 13, `same key (engine=mlxcel drafter=dflash capability=12.1 quant=affine) as entry "gb10-affine-dflash" at p.toml:2`},
		{"duplicate key by alias", "schema = 1\n" + validEntry + strings.NewReplacer(`"gb10-affine-dflash"`, `"other"`, `"mlxcel"`, `"mlxcel-server"`).Replace(validEntry), 13, "same key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("p.toml", []byte(tc.src))
			if err == nil {
				t.Fatalf("accepted: %+v", f)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not *ParseError: %v", err, err)
			}
			if pe.File != "p.toml" || pe.Line != tc.line {
				t.Errorf("at %s:%d, want p.toml:%d (%v)", pe.File, pe.Line, tc.line, err)
			}
			if !strings.Contains(pe.Msg, tc.msg) {
				t.Errorf("message %q lacks %q", pe.Msg, tc.msg)
			}
			if want := "p.toml:"; tc.line > 0 && !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

func TestParseAllowsInternalMTPOnMLXCEL(t *testing.T) {
	src := "schema = 1\n[[default]]\nengine = \"mlxcel\"\ndrafter = \"internal-mtp\"\nwidth = 16\n"
	if _, err := Parse("p.toml", []byte(src)); err != nil {
		t.Fatal(err)
	}
}

func TestParseErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    ParseError
		want string
	}{
		{ParseError{"policy.toml", 12, "bad"}, "policy.toml:12: bad"},
		{ParseError{"policy.toml", 0, "bad"}, "policy.toml: bad"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestParseProfileEntries(t *testing.T) {
	ok := map[string]any{"id": "p1", "engine": "mlxcel", "drafter": "dflash", "capability": "9.0", "quant": "affine",
		"width": int64(6), "pin": "mlx 81ba1c6a", "record": "docs/r.md"}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range ok {
			m[a] = b
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	es, err := ParseProfileEntries("prof.toml", []map[string]any{ok, with("id", "p2")}, []int{7}, nil, nil)
	if err == nil {
		t.Fatalf("duplicate key accepted: %+v", es)
	}
	if pe := err.(*ParseError); pe.Line != 0 || !strings.Contains(pe.Msg, "same key") {
		t.Errorf("err = %v", err)
	}

	other := with("capability", "12.1")
	other["id"] = "p2"
	es, err = ParseProfileEntries("prof.toml", []map[string]any{ok, other}, []int{7, 15}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Origin != "prof.toml:7" || es[1].Origin != "prof.toml:15" || es[0].Width != 6 {
		t.Errorf("entries = %+v", es)
	}

	for _, tc := range []struct {
		name string
		m    map[string]any
		msg  string
	}{
		{"int width", with("width", 4), ""},
		{"no pin", with("pin", nil), "[[policy.entry]] is missing pin"},
		{"no record", with("record", nil), "missing record"},
		{"unknown key", with("block_size", int64(4)), `unknown key "block_size" in [[policy.entry]]`},
		{"width 0", with("width", int64(0)), "widths 0 and 1 disable speculation"},
		{"quant unknown", with("quant", "unknown"), `quant "unknown" cannot key`},
		{"bad capability", with("capability", "sm_90"), "MAJOR.MINOR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseProfileEntries("prof.toml", []map[string]any{tc.m}, []int{21}, nil, nil)
			if tc.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line != 21 || !strings.Contains(pe.Msg, tc.msg) {
				t.Errorf("err = %v, want prof.toml:21 ... %q", err, tc.msg)
			}
		})
	}
}

// TestShippedPolicy pins what the embedded policy.toml says: the defaults
// mirror each engine, and there is exactly one measured entry.
func TestShippedPolicy(t *testing.T) {
	f := shipped(t)
	p := Merge(f)
	for _, tc := range []struct {
		e    key.Engine
		d    key.Drafter
		want int
	}{
		{key.MLXCEL, key.DFlash, 16},
		{key.MLXCEL, key.MTP, 4},
		{key.MLXCEL, key.InternalMTP, 16},
		{key.Sim, key.DFlash, 16},
		{key.Sim, key.MTP, 4},
		{key.LlamaCpp, key.Draft, 4},
		{key.LlamaCpp, key.MTP, 4},
		{key.LlamaCpp, key.DFlash, 4},
		{key.LlamaCpp, key.DSpark, 4},
		{key.LlamaCpp, key.Eagle3, 4},
	} {
		if w, _, ok := p.DefaultWidth(tc.e, tc.d); !ok || w != tc.want {
			t.Errorf("default %s/%s = %d, %v; want %d", tc.e, tc.d, w, ok, tc.want)
		}
	}
	for _, e := range key.Engines {
		for _, d := range key.Selectable(e) {
			if _, _, ok := p.DefaultWidth(e, d); !ok {
				t.Errorf("no default for selectable %s/%s", e, d)
			}
		}
	}
	if len(p.Entries) != 1 {
		t.Fatalf("entries = %+v", p.Entries)
	}
	h200 := key.Key{Engine: key.LlamaCpp, Drafter: key.Draft, Capability: key.Capability{Major: 9, Minor: 0}, Quant: key.QuantQ8_0}
	for _, q := range []key.Quant{key.QuantQ8_0, key.QuantQ4_0, key.QuantQ4_K, key.QuantF16} {
		k := h200
		k.Quant = q
		if e := p.Lookup(k); e != nil {
			t.Errorf("%s earned no entry in the H200 records, but the policy has %+v", q, e)
		}
	}
	gb10 := key.Key{Engine: key.MLXCEL, Drafter: key.DFlash, Capability: key.Capability{Major: 12, Minor: 1}, Quant: key.QuantAffine}
	e := p.Lookup(gb10)
	if e == nil || e.ID != "gb10-affine-dflash" || e.Width != 4 || e.RunnerUp != 3 || e.Pin != "mlx 81ba1c6a" ||
		e.Record != "docs/benchmark_results/draft-block-width-default-gb10-2026-09-20.md" {
		t.Errorf("gb10 entry = %+v", e)
	}
}

// TestParseLines: errors land on the right line when the file uses quoted
// keys, spaced headers, multi-line strings or several unknown keys.
func TestParseLines(t *testing.T) {
	cases := []struct {
		name string
		src  string
		line int
		msg  string
	}{
		{"quoted key and spaced header", "schema = 1\n[[ \"entry\" ]]\n\"widht\" = 4\n", 3, `unknown key "widht"`},
		{"literal-quoted key", "schema = 1\n[[entry]]\n'pinn' = 'x'\n", 3, `unknown key "pinn"`},
		{"earliest unknown key first", "schema = 1\n[[default]]\nzeta = 1\nalpha = 2\n", 3, `unknown key "zeta"`},
		{"dotted top-level key", "schema = 1\nfoo.bar = 1\n", 2, `unknown key "foo"`},
		{"multi-line string skipped", "schema = 1\n[[default]]\nengine = \"mlxcel\"\ndrafter = \"dflash\"\nnote = \"\"\"\nwidth = 99\n\"\"\"\nwidth = 1\n", 8, "widths 0 and 1"},
		{"second table's key", "schema = 1\n[[default]]\nengine = \"mlxcel\"\ndrafter = \"dflash\"\nwidth = 16\n\n[[default]]\nengine = \"mlxcel\"\ndrafter = \"mtp\"\nwidth = 300\n", 10, "above 256"},
		{"inline table array falls back to its key line", "schema = 1\n\nentry = [{id = \"a\", width = 1}]\n", 3, "missing engine"},
		{"subtable inside an entry", "schema = 1\n[[entry]]\nid = \"a\"\n[entry.extra]\nx = 1\n", 2, `unknown key "extra"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.toml", []byte(tc.src))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v", err)
			}
			if pe.Line != tc.line || !strings.Contains(pe.Msg, tc.msg) {
				t.Errorf("got %v, want line %d containing %q", err, tc.line, tc.msg)
			}
		})
	}
}

const recLine = `record = "docs/benchmark_results/x.md"`

func withRecords(repl string) string {
	return "schema = 1\n" + strings.Replace(validEntry, recLine, repl, 1)
}

func TestParseRecordsAndCost(t *testing.T) {
	src := withRecords(`records = ["docs/benchmark_results/a.md", "docs/benchmark_results/b.md"]
cost = [
  { record = "docs/benchmark_results/b.md", classic_ms = 3.11, widths = [2, 4], ms_per_cycle = [3.94, 5] },
]`)
	f, err := Parse("p.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	e := f.Entries[0]
	if e.Record != "docs/benchmark_results/a.md" || !reflect.DeepEqual(e.Records, []string{"docs/benchmark_results/a.md", "docs/benchmark_results/b.md"}) {
		t.Errorf("record %q records %q", e.Record, e.Records)
	}
	want := []CostRow{{Record: "docs/benchmark_results/b.md", ClassicMS: 3.11, Widths: []int{2, 4}, MS: []float64{3.94, 5}}}
	if !reflect.DeepEqual(e.Cost, want) {
		t.Errorf("cost %+v", e.Cost)
	}
	// record beside records: record comes first
	f, err = Parse("p.toml", []byte(withRecords(`record = "docs/benchmark_results/b.md"
records = ["docs/benchmark_results/a.md", "docs/benchmark_results/b.md"]`)))
	if err != nil || f.Entries[0].Record != "docs/benchmark_results/b.md" || f.Entries[0].Records[1] != "docs/benchmark_results/a.md" {
		t.Errorf("%+v %v", f, err)
	}
}

func TestParseRejectsRecordsAndCost(t *testing.T) {
	cost := func(c string) string { return withRecords(recLine + "\ncost = [" + c + "]") }
	for _, tc := range []struct {
		name, src string
		line      int
		msg       string
	}{
		{"records a string", withRecords(`records = "docs/x.md"`), 11, "records must be an array of strings, not a string"},
		{"records empty", withRecords(`records = []`), 11, "records is empty"},
		{"records twice", withRecords(`records = ["docs/a.md", "docs/a.md"]`), 11, `record "docs/a.md" is listed twice`},
		{"records not md", withRecords(`records = ["docs/a.json"]`), 11, "must be the repository-relative path of the record's .md"},
		{"records of numbers", withRecords(`records = [1]`), 11, "records must hold strings"},
		{"record not among records", withRecords(`record = "docs/c.md"` + "\n" + `records = ["docs/a.md"]`), 11, `record "docs/c.md" is not among records`},
		{"cost of another record", cost(`{ record = "docs/other.md", widths = [2], ms_per_cycle = [1.0] }`), 12, "must name one of the entry's records"},
		{"cost lengths differ", cost(`{ record = "docs/benchmark_results/x.md", widths = [2, 3], ms_per_cycle = [1.0] }`), 12, "2 widths but 1 ms_per_cycle figures"},
		{"cost widths descend", cost(`{ record = "docs/benchmark_results/x.md", widths = [3, 2], ms_per_cycle = [1.0, 2.0] }`), 12, "widths must ascend"},
		{"cost width 1", cost(`{ record = "docs/benchmark_results/x.md", widths = [1], ms_per_cycle = [1.0] }`), 12, "want a width from 2 to 256"},
		{"cost zero ms", cost(`{ record = "docs/benchmark_results/x.md", widths = [2], ms_per_cycle = [0.0] }`), 12, "must be above 0"},
		{"cost string ms", cost(`{ record = "docs/benchmark_results/x.md", widths = [2], ms_per_cycle = ["1"] }`), 12, "must be a number of milliseconds"},
		{"cost unknown key", cost(`{ record = "docs/benchmark_results/x.md", widths = [2], ms_per_cycle = [1.0], rows = 2 }`), 12, `unknown key "rows" in cost[0]`},
		{"cost twice for a record", cost(`{ record = "docs/benchmark_results/x.md", widths = [2], ms_per_cycle = [1.0] }, { record = "docs/benchmark_results/x.md", widths = [2], ms_per_cycle = [1.0] }`), 12, "repeats the cost table"},
		{"cost not a table", withRecords(recLine + "\ncost = 3"), 12, "cost must be an array of inline tables, not a integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.toml", []byte(tc.src))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v", err)
			}
			if pe.Line != tc.line || !strings.Contains(pe.Msg, tc.msg) {
				t.Errorf("p.toml:%d %q; want line %d and %q", pe.Line, pe.Msg, tc.line, tc.msg)
			}
		})
	}
}
