package plan

import "testing"

// A command line logged with a path holding a newline or a tab stays one
// line, and pastes into bash as the same argument ($'…'); plain and
// single-quoted forms are as before.
func TestShellQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "''"},
		{"/models/q4.gguf", "/models/q4.gguf"},
		{"my model.gguf", "'my model.gguf'"},
		{"it's.gguf", `'it'\''s.gguf'`},
		{"nl\nx.gguf", `$'nl\nx.gguf'`},
		{"d\tx's\\.gguf", `$'d\tx\'s\\.gguf'`},
		{"bell\a", `$'bell\x07'`},
		{"mix\n\xff.gguf", `$'mix\n\xff.gguf'`},
		{"real\n\uFFFD", "$'real\\n\uFFFD'"},
	} {
		if got := ShellQuote(tc.in); got != tc.want {
			t.Errorf("ShellQuote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
