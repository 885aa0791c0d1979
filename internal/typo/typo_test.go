package typo

import "testing"

func TestNearest(t *testing.T) {
	known := []string{"engine.name", "engine.binary", "draft.block_size", "--dry-run"}
	for _, c := range []struct{ name, want string }{
		{"engine.nme", "engine.name"},            // a letter left out
		{"draft.blokc_size", "draft.block_size"}, // two letters swapped: one edit
		{"--dryrun", "--dry-run"},
		{"engine.path", ""}, // too far from every key
	} {
		if got := Nearest(c.name, known); got != c.want {
			t.Errorf("Nearest(%q) = %q, want %q", c.name, got, c.want)
		}
	}
	if d := Distance("KYE", "KEY"); d != 1 {
		t.Errorf("a swap costs %d, want 1", d)
	}
}

// A case variant is a typo: NearestFold finds the flag it meant, spelt as
// the candidate spells it; Nearest does not (7 edits).
func TestNearestFold(t *testing.T) {
	known := []string{"--api-key", "--api-key-file", "--port"}
	for _, c := range []struct{ name, want string }{
		{"--API-KEY", "--api-key"},
		{"--Api-Kye", "--api-key"},
		{"--API-KEY-FILE", "--api-key-file"},
		{"--api-kye", "--api-key"},
		{"--MODEL", ""},
	} {
		if got := NearestFold(c.name, known); got != c.want {
			t.Errorf("NearestFold(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}

// Short names get one edit, a prefix counts, and a very short name no
// guess: tgi is two edits from sgl, c one from a.
func TestNearestName(t *testing.T) {
	engines := []string{"mlxcel", "llama.cpp", "vllm", "sglang", "sim", "sgl"}
	profiles := []string{"a", "b", "demo", "demo-load", "example"}
	for _, c := range []struct {
		name  string
		cands []string
		want  string
	}{
		{"llama.ccp", engines, "llama.cpp"},
		{"vlm", engines, "vllm"},
		{"tgi", engines, ""},
		{"dem", profiles, "demo"},
		{"demo-lod", profiles, "demo-load"},
		{"exmaple", profiles, "example"},
		{"c", profiles, ""},
		{"zzz", profiles, ""},
	} {
		if got := NearestName(c.name, c.cands); got != c.want {
			t.Errorf("NearestName(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}
