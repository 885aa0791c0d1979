package record

import "testing"

// A level verdict says "1 client", not "1 clients" (policy propose and
// policy check printed the latter).
func TestLevelVerdictAt(t *testing.T) {
	v := LevelVerdict{Width: 6, From: "measured", Why: "w"}
	for n, want := range map[int]string{1: "1 client: width 6 (measured): w", 4: "4 clients: width 6 (measured): w"} {
		if got := v.At(n); got != want {
			t.Errorf("At(%d) = %q, want %q", n, got, want)
		}
	}
}
