package typo

import "testing"

func TestNearest(t *testing.T) {
	known := []string{"engine.name", "engine.binary", "draft.block_size", "--dry-run", "--no-probe"}
	for _, c := range []struct{ name, want string }{
		{"engine.nme", "engine.name"},            // a letter left out
		{"draft.blokc_size", "draft.block_size"}, // two letters swapped: one edit
		{"--dryrun", "--dry-run"},
		{"engine.path", ""}, // too far from every key
		// Both edits in one short word make another word, not a typo:
		// --no-proxy was "did you mean --no-probe?", a flag doing
		// something else. Spread over two words, or in a long one, they
		// are a typo.
		{"--no-proxy", ""},
		{"--dri-run", "--dry-run"},
		{"draft.blok_sise", "draft.block_size"},
		{"engine.bineri", "engine.binary"},
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

// Distance keeps three rows and Nearest passes over candidates too long or
// short to be near: both must say what the whole table and a measure of
// every candidate say, on names of every length (swaps included).
func TestDistanceAndNearestAsTheFullTable(t *testing.T) {
	full := func(a, b string) int {
		d := make([][]int, len(a)+1)
		for i := range d {
			d[i] = make([]int, len(b)+1)
			d[i][0] = i
		}
		for j := range d[0] {
			d[0][j] = j
		}
		for i := 1; i <= len(a); i++ {
			for j := 1; j <= len(b); j++ {
				cost := 1
				if a[i-1] == b[j-1] {
					cost = 0
				}
				d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
				if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
					d[i][j] = min(d[i][j], d[i-2][j-2]+1)
				}
			}
		}
		return d[len(a)][len(b)]
	}
	names := []string{"", "a", "ab", "ba", "abc", "acb", "KEY", "KYE", "--api-key", "--api-kye", "--apikey", "-ngl", "--ngl", "--n-gpu-layers", "-c", "-x", "--ctx-size", "--ctx-siz", "ca", "abcd", "badc"}
	for _, a := range names {
		best, bestD := "", 3
		for _, b := range names {
			if got, want := Distance(a, b), full(a, b); got != want {
				t.Errorf("Distance(%q, %q) = %d, the full table says %d", a, b, got, want)
			}
			if d := full(a, b); d < bestD {
				best, bestD = b, d
			}
		}
		if got := Nearest(a, names); got != best {
			t.Errorf("Nearest(%q) = %q, measuring every candidate says %q", a, got, best)
		}
	}
}
