package adapt

import (
	"os"
	"strings"
	"testing"
)

// ParseMetrics reads whatever an engine answers: it may refuse, never
// panic, and what it accepts holds no negative position.
func FuzzParseMetrics(f *testing.F) {
	if b, err := os.ReadFile("../../engine/testdata/h200/metrics-after.txt"); err == nil {
		f.Add(string(b))
	}
	f.Add(`llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="3"} 7` + "\n")
	f.Add("llamacpp:requests_processing 2 1700000000\n")
	f.Fuzz(func(t *testing.T, body string) {
		s, err := ParseMetrics(strings.NewReader(body))
		if err != nil {
			return
		}
		if len(s.PerPos) > maxPositions {
			t.Fatalf("%d positions", len(s.PerPos))
		}
		s.Since(Snapshot{})
	})
}
