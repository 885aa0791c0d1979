package tomlpos

import "testing"

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

func TestZeroIndex(t *testing.T) {
	var x Index
	if got := x.Line("draft.block_size"); got != 0 {
		t.Errorf("zero Index Line = %d", got)
	}
}
