package control

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestControlCell runs one matrix cell with every log line:
// CONTROL_CELL="profile/traffic/seed" (-v).
func TestControlCell(t *testing.T) {
	want := os.Getenv("CONTROL_CELL")
	if want == "" {
		t.Skip("set CONTROL_CELL=profile/traffic/seed")
	}
	f := strings.Split(want, "/")
	seed, _ := strconv.Atoi(f[2])
	for _, p := range vProfiles(t) {
		for _, tr := range traffics(p) {
			if p.name != f[0] || tr.name != f[1] {
				continue
			}
			o := runCell(Config{}, p, tr.phases, uint64(seed), func(s string) { t.Log(s) })
			t.Logf("frac %.3f def %.3f switches %d end %d", o.tokens/o.oracle, o.def/o.oracle, o.switches, o.end)
		}
	}
}
