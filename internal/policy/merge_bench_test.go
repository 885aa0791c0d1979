package policy

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

var benchQuants = []key.Quant{
	key.QuantOther, key.QuantAffine, key.QuantNVFP4, key.QuantF32, key.QuantF16, key.QuantBF16,
	key.QuantQ4_0, key.QuantQ4_1, key.QuantQ5_0, key.QuantQ5_1, key.QuantQ8_0, key.QuantQ2_K,
	key.QuantQ3_K, key.QuantQ4_K, key.QuantQ5_K, key.QuantQ6_K, key.QuantIQ, key.QuantMXFP4, key.QuantTQ,
}

// bigPolicy writes a policy file of n entries with distinct keys (llama.cpp
// draft, then mlxcel dflash, on every capability and quantization); ids start with prefix, so
// two files with different prefixes collide by key only.
func bigPolicy(n int, prefix string) []byte {
	var b strings.Builder
	b.WriteString("schema = 1\n")
	i := 0
	for _, ed := range [][2]string{{"llama.cpp", "draft"}, {"mlxcel", "dflash"}} {
		for maj := 1; maj <= 99 && i < n; maj++ {
			for min := 0; min <= 9 && i < n; min++ {
				for _, q := range benchQuants {
					if i == n {
						break
					}
					fmt.Fprintf(&b, "\n[[entry]]\nid = \"%s-%d\"\nengine = \"%s\"\ndrafter = \"%s\"\ncapability = \"%d.%d\"\nquant = \"%s\"\nwidth = %d\npin = \"llama.cpp d32676d\"\nrecord = \"docs/benchmark_results/r%d.md\"\n",
						prefix, i, ed[0], ed[1], maj, min, q, 2+i%15, i)
					i++
				}
			}
		}
	}
	if i < n {
		panic("bigPolicy: not enough distinct keys")
	}
	return []byte(b.String())
}

// shipped is the embedded policy.toml, parsed.
func shipped(tb testing.TB) *File {
	tb.Helper()
	data, err := os.ReadFile("../../policy.toml")
	if err != nil {
		tb.Fatal(err)
	}
	return mustParse(tb, "policy.toml", data)
}

func mustParse(tb testing.TB, name string, data []byte) *File {
	tb.Helper()
	f, err := Parse(name, data)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// BenchmarkMerge20k: the embedded policy, a 20,000-entry file, and a second
// 20,000-entry file that replaces every entry of the first by key.
func BenchmarkMerge20k(b *testing.B) {
	base := shipped(b)
	one := mustParse(b, "one.toml", bigPolicy(20000, "one"))
	two := mustParse(b, "two.toml", bigPolicy(20000, "two"))
	b.ResetTimer()
	for b.Loop() {
		p := Merge(base, one, two)
		if len(p.Entries) < 20000 || len(p.Replaced) < 20000 {
			b.Fatalf("%d entries, %d replaced", len(p.Entries), len(p.Replaced))
		}
	}
}

// BenchmarkParseMerge20k is what a reload of a 20,000-entry policy file
// costs: parse it, then merge it over the embedded policy.
func BenchmarkParseMerge20k(b *testing.B) {
	base := shipped(b)
	data := bigPolicy(20000, "one")
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		Merge(base, mustParse(b, "one.toml", data))
	}
}

// naiveMerge is the rule Merge implements, written the obvious quadratic
// way: each entry of each layer, in order, removes every earlier entry with
// its key or its id and takes the place of the first one removed.
func naiveMerge(layers ...*File) *Policy {
	p := &Policy{}
	for _, f := range layers {
		if f == nil {
			continue
		}
		p.Layers = append(p.Layers, f.Name)
		for _, d := range f.Defaults {
			i := slices.IndexFunc(p.Defaults, func(o Default) bool { return o.Engine == d.Engine && o.Drafter == d.Drafter })
			if i < 0 {
				p.Defaults = append(p.Defaults, d)
			} else {
				p.Defaults[i] = d
			}
		}
		for _, e := range f.Entries {
			at := -1
			var kept []Entry
			for _, o := range p.Entries {
				if o.Key == e.Key || o.ID == e.ID {
					p.Replaced = append(p.Replaced, o)
					if at < 0 {
						at = len(kept)
						kept = append(kept, e)
					}
					continue
				}
				kept = append(kept, o)
			}
			if at < 0 {
				kept = append(kept, e)
			}
			p.Entries = kept
		}
	}
	return p
}

// TestMergeMatchesNaive: on random layers whose entries collide by key, by
// id and by both, Merge gives what the quadratic rule gives.
func TestMergeMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		var layers []*File
		for l := range 1 + r.IntN(4) {
			f := &File{Name: fmt.Sprintf("l%d.toml", l)}
			ids, keys := map[string]bool{}, map[key.Key]bool{}
			for range r.IntN(8) {
				id := fmt.Sprintf("e%d", r.IntN(6))
				k := key.Key{Engine: key.LlamaCpp, Drafter: key.Draft, Capability: key.Capability{Major: 9, Minor: r.IntN(3)}, Quant: benchQuants[r.IntN(2)]}
				if ids[id] || keys[k] { // Parse refuses duplicates within a file
					continue
				}
				ids[id], keys[k] = true, true
				f.Entries = append(f.Entries, Entry{ID: id, Key: k, Width: 2 + r.IntN(10), Origin: fmt.Sprintf("%s:%d", f.Name, len(f.Entries))})
			}
			if r.IntN(5) == 0 {
				layers = append(layers, nil)
			}
			layers = append(layers, f)
		}
		got, want := Merge(layers...), naiveMerge(layers...)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: Merge\n%+v\nwant\n%+v", round, got, want)
		}
	}
}
