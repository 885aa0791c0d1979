package tomlpos

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// SyntaxLine names the line of the byte the decoder refused. A control
// character at a line's start was said on the line before: the decoder's
// span for it is the byte before it, there the newline.
func TestSyntaxLine(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      int
	}{
		{"NUL at a line's start", "[engine]\nname = \"sim\"\n\n\x00x\n", 4},
		{"NUL mid-line", "[engine]\nname = \"sim\"\n\nx\x00x\n", 4},
		{"at the file's start", "\x01x = 1\n", 1},
		{"DEL at a line's start", "a = 1\n\n\n\x7f", 4},
		{"a carriage return alone at a line's start", "a = 1\n\rx\n", 2},
		{"after a comment", "a = 1 # c\n\x00", 2},
		{"inside a multi-line string", "x = \"\"\"\n\x01\"\"\"\n", 2},
		{"after a CRLF", "a = 1\r\n\x01x\n", 2},
		{"with a byte-order mark", "\xef\xbb\xbfa = 1\n\x00\n", 2},
		{"an unclosed header (the newline it stopped at)", "[server\nport = 1\n", 1},
	} {
		var m map[string]any
		_, err := toml.Decode(tc.src, &m)
		var pe toml.ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: no ParseError: %v", tc.name, err)
		}
		if got := SyntaxLine(tc.src, pe); got != tc.want {
			t.Errorf("%s: SyntaxLine = %d, want %d (%s; the decoder: line %d, %+v)", tc.name, got, tc.want, pe.Message, pe.Line, pe.Position)
		}
	}
}

func TestLine(t *testing.T) {
	text := `# comment
schema = 1

[engine]
name = "sim" # trailing
args = ["--x"]

[[policy.entry]]
id = "a"
width = 4

[[policy.entry]]
id = "b"
"quoted" = 'x # not a comment'

[draft]
schedule = {a = 1}

[engine.env]
FOO = "1"
`
	idx := Build(text)
	cases := []struct {
		path string
		want int
	}{
		{"schema", 2},
		{"engine", 4},
		{"engine.name", 5},
		{"engine.args", 6},
		{"policy.entry[0]", 8},
		{"policy.entry[0].width", 10},
		{"policy.entry[1].id", 13},
		{"policy.entry[1].quoted", 14},
		{"policy.entry[1].missing", 12},
		{"engine.nothing", 4},
		{"nowhere", 0},
		{"draft.schedule.a", 17}, // inside an inline table: the table's line
		{"engine.env", 19},       // a sub-table's own header, not [engine]'s
		{"engine.env.FOO", 20},
	}
	for _, c := range cases {
		if got := idx.Line(c.path); got != c.want {
			t.Errorf("Line(%q) = %d, want %d", c.path, got, c.want)
		}
	}
}

// A profile's entries written inline: an element's line is the array's,
// not the [policy] header's.
func TestLineInlineArray(t *testing.T) {
	idx := Build(`[policy]
files = []
entry = [{id = "x"},
  {id = "y"}]
`)
	for _, path := range []string{"policy.entry", "policy.entry[1]", "policy.entry[1].id"} {
		if got := idx.Line(path); got != 3 {
			t.Errorf("Line(%q) = %d, want 3", path, got)
		}
	}
}

// A key of a table written as a dotted key of an enclosing table, or of
// the root, is placed on its own line, not on the enclosing table's or the
// first line that starts the table's name (engine.env's variables were
// said at [engine]'s line, or at engine.name's).
func TestLineDottedKeys(t *testing.T) {
	for _, tc := range []struct {
		name, text, path string
		want             int
	}{
		{"in the enclosing table", "[engine]\nname = \"sim\"\n\nenv.A = \"1\"\nenv.B = \"2\"\n", "engine.env.B", 5},
		{"at the top", "engine.name = \"sim\"\n# x\nengine.env.A = \"1\"\n", "engine.env.A", 3},
		{"two levels up", "[a]\nx = 1\nb.c.d = 2\n", "a.b.c.d", 3},
		{"a quoted name with a dot", "[engine.env]\nX = \"1\"\n\"A.B\" = \"2\"\n", "engine.env.A.B", 3},
		{"not written: the enclosing table's key", "[engine]\nname = \"sim\"\nenv.A = \"1\"\n", "engine.env.Z", 3},
	} {
		if got := Build(tc.text).Line(tc.path); got != tc.want {
			t.Errorf("%s: Line(%q) = %d, want %d", tc.name, tc.path, got, tc.want)
		}
	}
}

func TestZeroIndex(t *testing.T) {
	var x Index
	if got := x.Line("draft.block_size"); got != 0 {
		t.Errorf("zero Index Line = %d", got)
	}
}

// manyTables is n [[policy.entry]] tables (element i's header on line
// 2i+1, its id on 2i+2), then n tables [t0] to [tn-1] (table i on 2n+1+i).
func manyTables(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "[[policy.entry]]\nid = \"e%d\"\n", i)
	}
	for i := range n {
		fmt.Fprintf(&b, "[t%d]\n", i)
	}
	return b.String()
}

// Build walks the regions once and a lookup walks none: a lookup per
// [[policy.entry]] that rescanned every region walked n²/2 of them (20,000
// entries took a minute to load). Counted, not timed. Not parallel: visits
// is the package's.
func TestLookupsWalkNoRegions(t *testing.T) {
	const n = 2000
	visits.Store(0)
	x := Build(manyTables(n))
	if got, want := visits.Load(), int64(2*n+1); got != want {
		t.Errorf("Build walked %d regions, want %d (each once)", got, want)
	}
	cases := []struct {
		name   string
		lookup func(i int) int
		want   func(i int) int
	}{
		{"element", func(i int) int { return x.Line(fmt.Sprintf("policy.entry[%d]", i)) }, func(i int) int { return 2*i + 1 }},
		{"element key", func(i int) int { return x.Line(fmt.Sprintf("policy.entry[%d].id", i)) }, func(i int) int { return 2*i + 2 }},
		{"element missing key", func(i int) int { return x.Line(fmt.Sprintf("policy.entry[%d].width", i)) }, func(i int) int { return 2*i + 1 }},
		{"table", func(i int) int { return x.Line(fmt.Sprintf("t%d", i)) }, func(i int) int { return 2*n + 1 + i }},
		{"top-level key", func(i int) int { return x.TopLine(fmt.Sprintf("t%d", i)) }, func(i int) int { return 2*n + 1 + i }},
	}
	for _, c := range cases {
		visits.Store(0)
		for i := range n {
			if got, want := c.lookup(i), c.want(i); got != want {
				t.Fatalf("%s %d: line %d, want %d", c.name, i, got, want)
			}
		}
		if got := visits.Load(); got > 0 {
			t.Errorf("%s: %d lookups walked %d regions, want none (Build indexes them)", c.name, n, got)
		}
	}
	visits.Store(0)
	if els := x.Elements("policy.entry"); len(els) != n || els[n-1].Line != 2*n-1 {
		t.Errorf("Elements: %d regions", len(els))
	}
	if got := visits.Load(); got > 0 {
		t.Errorf("Elements walked %d regions, want none", got)
	}
}

// BenchmarkLineEntries is the profile loader's work for 20,000
// [[policy.entry]] tables: index the text, then look up each element's line.
func BenchmarkLineEntries(b *testing.B) {
	const n = 20000
	text := manyTables(n)
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("policy.entry[%d]", i)
	}
	for b.Loop() {
		x := Build(text)
		for _, p := range paths {
			x.Line(p)
		}
	}
}

// An error the decoder reports by offset is placed in its array as a
// validator names it: bucket and number of a schedule.
func TestElementAt(t *testing.T) {
	big := "99999999999999999999"
	for _, c := range []struct {
		name, src string
		line      int
		want      []int
	}{
		{"one line", "[draft]\nschedule = [[1, 0, " + big + "]]\n", 2, []int{1, 3}},
		{"second bucket", "schedule = [[1, 3, 4], [" + big + ", 0, 1]]\n", 1, []int{2, 1}},
		{"buckets on lines of their own, comments between", "schedule = [ # load, width\n  [1, 3, 4], # [9, 9, 9],\n  [4, " + big + ", 1],\n]\n", 1, []int{2, 2}},
		{"strings with brackets and commas", "schedule = [[\"[,\", 'a,]', 1], [2, " + big + "]]\n", 1, []int{2, 2}},
		{"a quoted key with an =", "\"a=b\" = [1, " + big + "]\n", 1, []int{2}},
		{"a scalar", "port = " + big + "\n", 1, nil},
		{"an inline table", "x = [{a = 1, b = " + big + "}]\n", 1, nil},
		{"after the array", "x = [1, 2] # " + big + "\n", 1, nil},
		{"line past the end", "x = [" + big + "]", 5, nil},
	} {
		at := strings.Index(c.src, big)
		if got := ElementAt(c.src, c.line, at); !slices.Equal(got, c.want) {
			t.Errorf("%s: ElementAt = %v, want %v", c.name, got, c.want)
		}
	}
}

// The decoder's refusal of an integer past int64 is placed in its key's
// array from the decoder's own error, the bucket named as written where
// it is on one line: the schedule of the second [[entry]] (Line names the
// first's), one whose buckets sit on lines that Scan takes for headers,
// and one after a byte-order mark.
func TestBigIntOf(t *testing.T) {
	big := "99999999999999999999"
	for _, c := range []struct {
		name, src string
		at        []int
		array     string
	}{
		{"a profile's", "[draft]\nschedule = [[1, 1, 6], [2,0 , " + big + "]]\n", []int{2, 3}, "[2, 0, " + big + "]"},
		{"the second entry's", "schema = 1\n[[entry]]\nid = \"a\"\nschedule = [[1, 0, 4]]\n[[entry]]\nid = \"b\"\nschedule = [[1, 1, 6], [" + big + ", 0, 4]]\n", []int{2, 1}, "[" + big + ", 0, 4]"},
		{"buckets on lines of their own", "[draft]\nschedule = [\n  [1, 3, 4], # [2, 2, 2]\n  [-" + big + ", 0, 1],\n]\n", []int{2, 1}, "[-" + big + ", 0, 1]"},
		{"a bucket across lines", "[draft]\nschedule = [[1, 1, 6], [2,\n " + big + ", 4]]\n", []int{2, 2}, ""},
		{"after a byte-order mark", "\xef\xbb\xbf[draft]\nschedule = [[1, 0, " + big + "]]\n", []int{1, 3}, "[1, 0, " + big + "]"},
		{"a scalar", "[server]\nport = " + big + "\n", nil, ""},
	} {
		var raw map[string]any
		_, err := toml.Decode(c.src, &raw)
		var pe toml.ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, ok := BigIntOf(c.src, pe)
		if !ok || !strings.HasSuffix(b.Text, big) || !slices.Equal(b.At, c.at) || b.Array != c.array {
			t.Errorf("%s: BigIntOf = %+v, %v; want at %v, array %q", c.name, b, ok, c.at, c.array)
		}
	}
	var raw map[string]any
	_, err := toml.Decode("x = [1, 2\n", &raw)
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		t.Fatal(err)
	}
	if b, ok := BigIntOf("x = [1, 2\n", pe); ok {
		t.Errorf("a syntax error: %+v", b)
	}
}

// An error about one element of an array written over several lines
// names that element's line, not that of the key's "= [" (a schedule's
// bucket 2 on line 14 was said on line 12); where the value is no array
// of that assignment, it is 0, for the caller to keep the key's line.
func TestElementLine(t *testing.T) {
	multi := "[draft]\nkind = \"dflash\"\nschedule = [ # lo, hi, width\n  [1, 1, 6],\n\n  # [9, 9, 9],\n  [2, \"]\", 0],\n  [3, 0, 4]]\n"
	for _, c := range []struct {
		name, src, path string
		i, want         int
	}{
		{"first bucket on its own line", multi, "draft.schedule", 1, 4},
		{"past a blank line, a comment and a string with a bracket", multi, "draft.schedule", 2, 7},
		{"the last bucket", multi, "draft.schedule", 3, 8},
		{"no such bucket", multi, "draft.schedule", 4, 0},
		{"one line", "[draft]\nschedule = [[1, 1, 6], [2, 0, 4]]\n", "draft.schedule", 2, 2},
		{"an element of the second [[entry]]", "[[entry]]\nschedule = [[1, 0, 4]]\n[[entry]]\nschedule = [\n  [1, 1, 6],\n  [2, 0, 0],\n]\n", "entry[1].schedule", 2, 6},
		{"a dotted key at the top", "draft.schedule = [\n[1, 0, 4]]\n", "draft.schedule", 1, 2},
		{"a string", "[draft]\nschedule = \"1:6,2+:0\"\n", "draft.schedule", 2, 0},
		{"an inline table", "draft = {schedule = [\n[1, 0, 4]]}\n", "draft.schedule", 1, 0},
		{"no such key", "[draft]\nkind = \"dflash\"\n", "draft.schedule", 1, 0},
		{"the zero Index", "", "draft.schedule", 1, 0},
	} {
		if got := Build(c.src).ElementLine(c.path, c.i); got != c.want {
			t.Errorf("%s: ElementLine(%q, %d) = %d, want %d", c.name, c.path, c.i, got, c.want)
		}
	}
	if got := (Index{}).ElementLine("draft.schedule", 1); got != 0 {
		t.Errorf("Index{}.ElementLine = %d, want 0", got)
	}
}
