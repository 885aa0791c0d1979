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
