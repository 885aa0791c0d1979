package serve

import "testing"

func TestDiffArgv(t *testing.T) {
	for _, c := range []struct {
		a, b []string
		want string
	}{
		{[]string{"sim", "--draft-block-size", "4", "--port", "1"}, []string{"sim", "--draft-block-size", "3", "--port", "1"}, "--draft-block-size 4 → 3"},
		{[]string{"llama-server", "-m", "t.gguf"}, []string{"llama-server", "-m", "t.gguf", "--no-mmap"}, "+--no-mmap"},
		{[]string{"llama-server", "--spec-draft-n-max=3", "-ngl", "99"}, []string{"llama-server", "-ngl", "99"}, "-(--spec-draft-n-max 3)"},
		{[]string{"x", "--temp", "-1"}, []string{"x", "--temp", "-2"}, "--temp -1 → -2"},
		{[]string{"x", "-a"}, []string{"x", "-a"}, "environment"},
	} {
		if got := diffArgv(c.a, c.b); got != c.want {
			t.Errorf("diffArgv(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}
