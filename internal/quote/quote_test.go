package quote

import (
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"model.gguf", "model.gguf"},
		{"a b/c.gguf", "a b/c.gguf"},
		{"a\nb", `"a\nb"`},
		{"a\x1b[31mb", `"a\x1b[31mb"`},
		{"\xff", `"\xff"`},
		{strings.Repeat("x", 130), `"` + strings.Repeat("x", 120) + `"... (130 bytes)`},
		{strings.Repeat("é", 70), `"` + strings.Repeat("é", 60) + `"... (140 bytes)`},
	} {
		if got := Text(c.in, 0); got != c.want {
			t.Errorf("Text(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

// Controls escapes every control character but newline, and leaves
// printable text as it is.
func TestControls(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain/path.gguf", "plain/path.gguf"},
		{"a\nb", "a\nb"},
		{"tab\there", `tab\there`},
		{"esc\x1b[2J", `esc\x1b[2J`},
		{"nel\u0085", `nel\u0085`},
		{"ünïcödé", "ünïcödé"},
	} {
		if got := Controls(tc.in); got != tc.want {
			t.Errorf("Controls(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
