package tomlguard

import "testing"

func TestText(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{int64(4), "4"}, {"4", `"4"`}, {4.0, "4.0"}, {2.5, "2.5"}, {1e20, "100000000000000000000.0"}, {1e21, "1e+21"}, {-1e30, "-1e+30"}, {1.5e300, "1.5e+300"},
		{map[string]any{"a": int64(1)}, "{…}"}, {[]any{int64(1)}, "[…]"}, {true, "true"},
	} {
		if got := Text(c.v); got != c.want {
			t.Errorf("Text(%#v) = %q, want %q", c.v, got, c.want)
		}
	}
}
