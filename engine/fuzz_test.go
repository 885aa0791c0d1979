package engine

import (
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

// Parsers of engine output must never panic, whatever the engine prints.

func FuzzParseMetricsPositions(f *testing.F) {
	f.Add(string(readGolden(f, "new-spec-metrics-after.txt")))
	f.Add(PerPosMetric + `{position="0"} 1`)
	f.Add(PerPosMetric + `{position="\"} 1`)
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseMetricsPositions(s)
		if err == nil && n < 0 {
			t.Fatal("negative count")
		}
	})
}

func FuzzParseTimings(f *testing.F) {
	f.Add(readGolden(f, "new-spec-completion.json"))
	f.Add([]byte(`{"timings":{"draft_n":1e300}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tm, err := ParseTimings(b)
		if err == nil && tm.DraftAccepted > tm.DraftN {
			t.Fatal("accepted > drafted")
		}
	})
}

func FuzzParseSlotsNMax(f *testing.F) {
	f.Add(readGolden(f, "old-spec-slots-after.json"))
	f.Add([]byte(`[{"id":0,"params":{"speculative.n_max":1e99}}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseSlotsNMax(b)
		_, _ = ParseSlotNMax(b, 3)
	})
}

func FuzzObserveLine(f *testing.F) {
	f.Add("Starting BatchScheduler (speculative=dflash (drafter=d, block_size=4, block_size_from=x, explicit_kind=true))")
	f.Add("DFlash diagnostics block_size=4 rounds=77 acceptance_rate=0.5")
	f.Add("draft acceptance = 1.00000 (   11 accepted /    11 generated), mean len =  3.75")
	f.Add("speculative=x ((((")
	f.Fuzz(func(t *testing.T, line string) {
		for _, e := range key.Engines {
			a, _ := For(e)
			o, ok := a.ObserveLine(line)
			if !ok && o != (Observation{}) {
				t.Fatal("ok=false with a non-zero observation")
			}
		}
		_, _ = ParseDiagnostics(line)
		_, _ = ParseLlamaAcceptance(line)
		_ = ParseLlamaHelp(line)
		v, c := ParseLlamaVersion(line)
		if c != "" && !strings.Contains(v, c) {
			t.Fatal("commit not in version")
		}
	})
}
