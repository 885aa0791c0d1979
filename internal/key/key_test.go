package key

import (
	"errors"
	"strings"
	"testing"
)

func TestParseEnginePy(t *testing.T) {
	for in, want := range map[string]Engine{"vllm": VLLM, "vLLM": VLLM, "vllm-serve": VLLM, "sglang": SGLang, "SGLang": SGLang, "sglang.launch_server": SGLang} {
		if got, err := ParseEngine(in); err != nil || got != want {
			t.Errorf("%q: %q %v", in, got, err)
		}
	}
	if _, err := ParseEngine("tgi"); err == nil {
		t.Error("tgi accepted")
	}
}

// vLLM's method names and SGLang's algorithm names read as the launcher's kinds.
func TestParseDrafterEngineSpellings(t *testing.T) {
	for in, want := range map[string]Drafter{
		"draft_model": Draft, "STANDALONE": Draft, "NEXTN": MTP, "EAGLE": Eagle, "EAGLE3": Eagle3,
		"ngram": Ngram, "NGRAM": Ngram, "DFLASH": DFlash, "draft-simple": Draft,
	} {
		if got, err := ParseDrafter(in); err != nil || got != want {
			t.Errorf("%q: %q %v", in, got, err)
		}
	}
}

func TestSelectablePy(t *testing.T) {
	for _, e := range []Engine{VLLM, SGLang} {
		if DefaultDrafter(e) != Draft {
			t.Errorf("%s default %s", e, DefaultDrafter(e))
		}
		for _, d := range []Drafter{Draft, Eagle, Eagle3, MTP, Ngram, DFlash} {
			if err := CheckSelectable(e, d); err != nil {
				t.Errorf("%s %s: %v", e, d, err)
			}
		}
		for _, d := range []Drafter{DSpark, InternalMTP} {
			if CheckSelectable(e, d) == nil {
				t.Errorf("%s %s selectable", e, d)
			}
		}
	}
	// Eagle and ngram are not llama.cpp's or mlxcel's.
	for _, e := range []Engine{LlamaCpp, MLXCEL} {
		for _, d := range []Drafter{Eagle, Ngram} {
			if CheckSelectable(e, d) == nil {
				t.Errorf("%s %s selectable", e, d)
			}
		}
	}
}

func TestFetchesModel(t *testing.T) {
	for _, c := range []struct {
		e    Engine
		ref  string
		want bool
	}{
		{VLLM, "Qwen/Qwen3-8B", true},
		{SGLang, "[ngram]", true},
		{SGLang, "/abs/dir", false},
		{VLLM, "../up/dir", false},
		{MLXCEL, "Qwen/Qwen3-8B", false},
		{Sim, "ngram", false},
	} {
		if got := FetchesModel(c.e, c.ref); got != c.want {
			t.Errorf("%s %q: %v", c.e, c.ref, got)
		}
	}
}

// A typo of an engine's name is told the name it meant (before, only the
// list: MLXCEL_ENGINE=llama.ccp); every spelling offered parses.
func TestParseEngineDidYouMean(t *testing.T) {
	for in, want := range map[string]string{
		"llama.ccp": "did you mean llama.cpp?",
		"vlm":       "did you mean vllm?",
		"sglnag":    "did you mean sglang?",
		"tgi":       "(known: mlxcel",
	} {
		if _, err := ParseEngine(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseEngine(%q) = %v, want %q", in, err, want)
		}
	}
	if _, err := ParseEngine("tgi"); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("tgi: %v, want no guess", err)
	}
	for _, sp := range engineSpellings {
		if e, err := ParseEngine(strings.ToUpper(sp.spelt)); err != nil || e != sp.e {
			t.Errorf("offered spelling %q: %v, %v; want %v", sp.spelt, e, err, sp.e)
		}
	}
}

// A capability is MAJOR.MINOR or sm_MAJORMINOR; one written so whose
// major version is outside 1 to 99 is refused saying the range, not the
// form.
func TestParseCapability(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Capability
		err  string // "" = accepted
	}{
		{"9.0", Capability{9, 0}, ""},
		{"12.1", Capability{12, 1}, ""},
		{"sm_90", Capability{9, 0}, ""},
		{"sm_121a", Capability{12, 1}, ""},
		{"99.9", Capability{99, 9}, ""},
		{"100.0", Capability{}, `"100.0" is out of range: the major version is 1 to 99`},
		{"0.5", Capability{}, `"0.5" is out of range: the major version is 1 to 99`},
		{"sm_1000", Capability{}, `"sm_1000" is out of range`},
		{"sm_05", Capability{}, `"sm_05" is out of range`},
		{"twelve", Capability{}, "malformed compute capability"},
		{"9.10", Capability{}, "malformed compute capability"},
		{"sm_9", Capability{}, "malformed compute capability"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseCapability(tc.in)
			if tc.err == "" {
				if err != nil || got != tc.want {
					t.Fatalf("got %v, %v; want %v", got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err = %v, want one holding %q", err, tc.err)
			}
			if ranged := strings.Contains(tc.err, "out of range"); errors.Is(err, ErrCapabilityRange) != ranged {
				t.Fatalf("errors.Is(err, ErrCapabilityRange) = %v, want %v", !ranged, ranged)
			}
		})
	}
}
