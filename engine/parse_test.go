package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// captures are the real llama-server bytes the fake is built from.
func readGolden(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "fakellama", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseLlamaHelp(t *testing.T) {
	if got := ParseLlamaHelp(string(readGolden(t, "new-help.txt"))); got != Spelling2026 {
		t.Errorf("new help: %q", got)
	}
	if got := ParseLlamaHelp(string(readGolden(t, "old-help.txt"))); got != SpellingLegacy {
		t.Errorf("old help: %q", got)
	}
	for in, want := range map[string]Spelling{
		"":                               SpellingUnknown,
		"usage: mlxcel-server [OPTIONS]": SpellingUnknown,
		"--spec-draft-n-max N":           SpellingUnknown, // no draft-simple: not enough for 2026
		"--draft-max N":                  SpellingLegacy,
		"--spec-draft-n-max N\n--spec-type none,draft-simple\n--draft-max N  removed": Spelling2026,
	} {
		if got := ParseLlamaHelp(in); got != want {
			t.Errorf("ParseLlamaHelp(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseLlamaVersion(t *testing.T) {
	tests := []struct{ in, version, commit string }{
		{string(readGolden(t, "new-version.txt")), "9749 (d32676d)", "d32676d"},
		{string(readGolden(t, "old-version.txt")), "8306 (b1a190e)", "b1a190e"},
		{"version: 1\n", "1", ""},
		// cmake without git (a source archive) writes BUILD_NUMBER 0 and
		// BUILD_COMMIT "unknown".
		{"version: 0 (unknown)\nbuilt with GNU 13.3.0 for Linux x86_64\n", "0 (unknown)", ""},
		{"garbage", "", ""},
		{"load_backend: loaded CUDA\nversion: 6000 (abc1234)\nbuilt with", "6000 (abc1234)", "abc1234"},
	}
	for _, tt := range tests {
		v, c := ParseLlamaVersion(tt.in)
		if v != tt.version || c != tt.commit {
			t.Errorf("ParseLlamaVersion(%q) = %q, %q; want %q, %q", tt.in, v, c, tt.version, tt.commit)
		}
	}
}

func TestParseMetricsPositions(t *testing.T) {
	tests := []struct {
		file string
		want int
	}{
		{"new-spec-metrics.txt", 0},
		{"new-spec-metrics-after.txt", 3},
		{"new-md-only-metrics-after.txt", 0},
		{"new-plain-metrics-after.txt", 0},
		{"old-spec-metrics-after.txt", 0},
	}
	for _, tt := range tests {
		n, err := ParseMetricsPositions(string(readGolden(t, tt.file)))
		if err != nil || n != tt.want {
			t.Errorf("%s: %d, %v; want %d", tt.file, n, err, tt.want)
		}
	}
	bad := []string{
		PerPosMetric + " 3\n",
		PerPosMetric + `{position="x"} 3` + "\n",
		PerPosMetric + `{position=0} 3` + "\n",
	}
	for _, b := range bad {
		if _, err := ParseMetricsPositions(b); err == nil {
			t.Errorf("no error for %q", b)
		}
	}
	dup := PerPosMetric + `{position="0"} 1` + "\n" + PerPosMetric + `{position="0",slot="1"} 1` + "\n" + PerPosMetric + `_created{position="9"} 1` + "\n"
	if n, err := ParseMetricsPositions(dup); n != 1 || err != nil {
		t.Errorf("dup: %d %v", n, err)
	}
}

func TestParseSlotsNMax(t *testing.T) {
	if n, err := ParseSlotsNMax(readGolden(t, "old-spec-slots-after.json")); n != 3 || err != nil {
		t.Errorf("old spec: %d %v", n, err)
	}
	if n, err := ParseSlotNMax(readGolden(t, "old-spec-slots-after.json"), 3); n != 3 || err != nil {
		t.Errorf("old spec slot 3: %d %v", n, err)
	}
	if _, err := ParseSlotNMax(readGolden(t, "old-spec-slots-after.json"), 0); err == nil {
		t.Error("slot 0 served nothing: want an error")
	}
	if n, err := ParseSlotsNMax(readGolden(t, "old-plain-slots-after.json")); n != 16 || err != nil {
		t.Errorf("old plain: %d %v", n, err)
	}
	for _, f := range []string{"new-spec-slots-after.json", "old-spec-slots.json", "new-spec-slots.json"} {
		if _, err := ParseSlotsNMax(readGolden(t, f)); err == nil {
			t.Errorf("%s: want an error (no n_max)", f)
		}
	}
	if _, err := ParseSlotsNMax([]byte(`{"error":{}}`)); err == nil {
		t.Error("object: want an error")
	}
	if _, err := ParseSlotsNMax([]byte(`[{"id":0,"params":{"speculative.n_max":2}},{"id":1,"params":{"speculative.n_max":3}}]`)); err == nil {
		t.Error("disagreeing slots: want an error")
	}
}

func TestParseTimings(t *testing.T) {
	tests := []struct {
		file                 string
		hasDraft             bool
		draftN, accepted, pn int
	}{
		{"new-spec-completion.json", true, 11, 11, 16},
		{"old-spec-completion.json", true, 10, 10, 16},
		{"new-md-only-completion.json", false, 0, 0, 16},
		{"new-plain-completion.json", false, 0, 0, 16},
		{"old-plain-completion.json", false, 0, 0, 16},
	}
	for _, tt := range tests {
		tm, err := ParseTimings(readGolden(t, tt.file))
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		if tm.HasDraft != tt.hasDraft || tm.DraftN != tt.draftN || tm.DraftAccepted != tt.accepted || tm.PredictedN != tt.pn {
			t.Errorf("%s: %+v", tt.file, tm)
		}
	}
	// The last event of a native stream and the final /v1/completions chunk carry timings too.
	for _, f := range []string{"new-spec-completion-stream.txt", "new-spec-v1-completions-stream.txt"} {
		lines := strings.Split(strings.TrimSpace(string(readGolden(t, f))), "\n\n")
		last := lines[len(lines)-1]
		if last == "data: [DONE]" {
			last = lines[len(lines)-2]
		}
		tm, err := ParseTimings([]byte(last))
		if err != nil || tm.DraftN != 11 || tm.PredictedPerSecond <= 0 {
			t.Errorf("%s: %+v %v", f, tm, err)
		}
	}
	tm, err := ParseTimings([]byte(`{"predicted_n":5,"draft_n":4,"draft_n_accepted":3,"draft_rounds":2,"draft_kind":"dflash"}`))
	if err != nil || tm.DraftRounds != 2 || tm.PredictedN != 5 {
		t.Errorf("bare mlxcel timings: %+v %v", tm, err)
	}
	for _, b := range []string{``, `[]`, `{"content":"x"}`, `{"timings":{"draft_n":1,"draft_n_accepted":2}}`, `{"timings":"x"}`} {
		if _, err := ParseTimings([]byte(b)); err == nil {
			t.Errorf("ParseTimings(%q): want an error", b)
		}
	}
}

func TestObserveMLXCEL(t *testing.T) {
	tests := []struct {
		line string
		ok   bool
		want Observation
	}{
		{"Starting BatchScheduler (max_batch_size=1, max_queue_depth=32, prefill_chunk_size=512, max_batch_prefill=4, decode_storage=auto, speculative=dflash (drafter=/m/d, block_size=4, block_size_from=measured default for sm_121 with an affine-quantized target, explicit_kind=true))",
			true, Observation{Speculative: true, Width: 4, Kind: "dflash", From: "measured default for sm_121 with an affine-quantized target"}},
		{"2026-09-20T10:00:00Z  INFO mlxcel::server::model_provider::model_worker: Starting BatchScheduler (max_batch_size=1, speculative=mtp (drafter=/m/(x)/d, block_size=3, block_size_from=per-kind default, no measurement for sm_90 with an affine-quantized target, explicit_kind=false))",
			true, Observation{Speculative: true, Width: 3, Kind: "mtp", From: "per-kind default, no measurement for sm_90 with an affine-quantized target"}},
		{"\x1b[32m INFO\x1b[0m Starting BatchScheduler (speculative=dflash (drafter=d, block_size=16, explicit_kind=true))",
			true, Observation{Speculative: true, Width: 16, Kind: "dflash"}},
		{"Starting BatchScheduler (max_batch_size=1, speculative=off)", true, Observation{Kind: "off"}},
		{"Starting BatchScheduler (speculative=classic (drafter=d, num_draft_tokens=3, auto_detected_kind=draft))", true, Observation{Speculative: true, Width: 4, Kind: "classic"}},
		{"MTP declined: probe mismatch. Falling back to classic decode. See docs", true, Observation{Declined: true}},
		{"mtp declined: falling back to classic decode", true, Observation{Declined: true}},
		{"Error: Speculative decoding dispatch resolution failed: bad config", true, Observation{Error: "Speculative decoding dispatch resolution failed: bad config"}},
		{"DFlash diagnostics block_size=4 rounds=77", false, Observation{}},
		{"listening on 127.0.0.1:8080", false, Observation{}},
	}
	for _, e := range []string{"mlxcel", "sim"} {
		a, _ := For(mustEngine(e))
		for _, tt := range tests {
			got, ok := a.ObserveLine(tt.line)
			tt.want.Line = tt.line
			if !ok {
				got.Line = tt.line
			}
			if ok != tt.ok || got != tt.want {
				t.Errorf("%s ObserveLine(%q) = %+v, %v; want %+v, %v", e, tt.line, got, ok, tt.want, tt.ok)
			}
		}
	}
}

func TestParseDiagnostics(t *testing.T) {
	line := "2026-09-20T10:00:01Z  INFO mlxcel::server::batch::dflash_target: DFlash diagnostics block_size=4 rounds=77 proposed_tokens=231 accepted_tokens=123 acceptance_rate=0.5324675 emitted_per_verify=2.5844156 zero_accept_rounds=22 partial_accept_rounds=30 full_accept_rounds=25 prefill_verify_ms=10.5 draft_ms=100.25 verify_ms=900.0 target_argmax_sync_ms=850.5 decode_ms=1200.75"
	d, ok := ParseDiagnostics(line)
	if !ok {
		t.Fatal("not parsed")
	}
	if d.BlockSize != 4 || d.Rounds != 77 || d.ProposedTokens != 231 || d.AcceptedTokens != 123 ||
		d.AcceptanceRate != 0.5324675 || d.EmittedPerVerify != 2.5844156 || d.TargetArgmaxSyncMS != 850.5 || d.DecodeMS != 1200.75 ||
		d.Fields["zero_accept_rounds"] != 22 {
		t.Errorf("%+v", d)
	}
	for _, l := range []string{"", "DFlash diagnostics", "DFlash diagnostics rounds=0", "speculative=dflash (block_size=4)"} {
		if _, ok := ParseDiagnostics(l); ok {
			t.Errorf("ParseDiagnostics(%q) ok", l)
		}
	}
	if d, ok := ParseDiagnostics("DFlash diagnostics block_size=16 rounds=0 proposed_tokens=0"); !ok || d.Rounds != 0 || d.BlockSize != 16 {
		t.Errorf("warm-up line: %+v %v", d, ok)
	}
}

func TestParseLlamaAcceptance(t *testing.T) {
	a, ok := ParseLlamaAcceptance("0.00.157.514 I slot print_timing: id  3 | task 2 | draft acceptance = 1.00000 (   11 accepted /    11 generated), mean len =  3.75")
	if !ok || a.Accepted != 11 || a.Generated != 11 || a.Rate != 1 || !a.HasMeanLen || a.MeanLen != 3.75 || a.Steps() != 4 {
		t.Errorf("new: %+v %v", a, ok)
	}
	a, ok = ParseLlamaAcceptance("I slot print_timing: id  0 | task 56 | draft acceptance = 0.55636 (  153 accepted /   275 generated), mean len =  4.33")
	if !ok || a.Accepted != 153 || a.Generated != 275 || a.MeanLen != 4.33 {
		t.Errorf("h200: %+v", a)
	}
	a, ok = ParseLlamaAcceptance("draft acceptance rate = 1.00000 (   10 accepted /    10 generated)")
	if !ok || a.Accepted != 10 || a.HasMeanLen || a.Steps() != 0 {
		t.Errorf("old: %+v %v", a, ok)
	}
	// Every acceptance line in the captured logs parses.
	for _, f := range []string{"new-spec-server-stderr.txt", "old-spec-server-stderr.txt", "old-spec-env-server-stderr.txt"} {
		n := 0
		for _, l := range strings.Split(string(readGolden(t, f)), "\n") {
			if strings.Contains(l, "draft acceptance") {
				if _, ok := ParseLlamaAcceptance(l); !ok {
					t.Errorf("%s: %q not parsed", f, l)
				}
				n++
			}
		}
		if n != 3 {
			t.Errorf("%s: %d acceptance lines, want 3", f, n)
		}
	}
}

func TestObserveLlama(t *testing.T) {
	a, _ := For(mustEngine("llama.cpp"))
	if o, ok := a.ObserveLine("0.00.157.514 I slot print_timing: id  3 | task 2 | draft acceptance = 1.00000 (   11 accepted /    11 generated), mean len =  3.75"); !ok || !o.Speculative {
		t.Errorf("acceptance: %+v %v", o, ok)
	}
	for _, f := range []string{"new-env-draft-max.txt", "new-flag-draft-max.txt", "old-flag-spec-draft-n-max.txt"} {
		first, _, _ := strings.Cut(string(readGolden(t, f)), "\n")
		o, ok := a.ObserveLine(first)
		if !ok || o.Error == "" {
			t.Errorf("%s: %+v %v", f, o, ok)
		}
	}
	for _, l := range strings.Split(string(readGolden(t, "new-md-only-server-stderr.txt")), "\n") {
		if o, ok := a.ObserveLine(l); ok {
			t.Errorf("md-only log line %q observed as %+v", l, o)
		}
	}
}
