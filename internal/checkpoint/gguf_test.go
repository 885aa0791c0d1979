package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

// A minimal GGUF writer for synthetic headers.

type tensorSpec struct {
	name string
	dims []uint64
	typ  uint32
}

type ggufSpec struct {
	version  uint32 // 0 = 3
	arch     string // "" = llama
	fileType int    // 0 = absent
	tensors  []tensorSpec
	extra    func(w *ggufWriter) int // writes extra KVs, returns how many
}

type ggufWriter struct{ bytes.Buffer }

func (w *ggufWriter) u32(v uint32) { binary.Write(w, binary.LittleEndian, v) }
func (w *ggufWriter) u64(v uint64) { binary.Write(w, binary.LittleEndian, v) }
func (w *ggufWriter) str(s string) { w.u64(uint64(len(s))); w.WriteString(s) }
func (w *ggufWriter) kvStr(k, v string) {
	w.str(k)
	w.u32(8)
	w.str(v)
}
func (w *ggufWriter) kvU32(k string, v uint32) {
	w.str(k)
	w.u32(4)
	w.u32(v)
}

func encodeGGUF(s ggufSpec) []byte {
	var body ggufWriter
	n := 2
	arch := s.arch
	if arch == "" {
		arch = "llama"
	}
	body.kvStr("general.architecture", arch)
	body.kvStr("general.name", "synthetic "+arch)
	if s.fileType != 0 {
		body.kvU32("general.file_type", uint32(s.fileType))
		n++
	}
	// A vocabulary-like string array, a float and a bool, as real files have.
	body.str("tokenizer.ggml.tokens")
	body.u32(9)
	body.u32(8)
	body.u64(3)
	for _, tok := range []string{"<s>", "</s>", "hello"} {
		body.str(tok)
	}
	body.str(arch + ".rope.freq_base")
	body.u32(6)
	binary.Write(&body, binary.LittleEndian, float32(10000))
	body.str("general.bool")
	body.u32(7)
	body.WriteByte(1)
	body.str(arch + ".scores")
	body.u32(9)
	body.u32(6)
	body.u64(2)
	binary.Write(&body, binary.LittleEndian, []float32{1, 2})
	n += 4
	if s.extra != nil {
		n += s.extra(&body)
	}
	var off uint64
	for _, t := range s.tensors {
		body.str(t.name)
		body.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			body.u64(d)
		}
		body.u32(t.typ)
		body.u64(off)
		off += 32
	}
	var w ggufWriter
	w.WriteString("GGUF")
	v := s.version
	if v == 0 {
		v = 3
	}
	w.u32(v)
	w.u64(uint64(len(s.tensors)))
	w.u64(uint64(n))
	w.Write(body.Bytes())
	w.Write(make([]byte, 32)) // stand-in for alignment and data
	return w.Bytes()
}

func writeGGUF(t testing.TB, path string, s ggufSpec) {
	t.Helper()
	if err := os.WriteFile(path, encodeGGUF(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Type ids (ggml.h).
const (
	tF32, tF16, tQ4_0, tQ8_0, tQ4_K, tQ6_K, tBF16, tMXFP4, tIQ4_XS = 0, 1, 2, 8, 12, 14, 30, 39, 23
)

// model lays out a small llama: embeddings and output head, and per layer
// attention (q,k,v,o), ffn (gate, up, down) and 1-D norms.
func model(layers int, embd, head, norm uint32, typeOf func(layer int, name string) uint32) []tensorSpec {
	const d, ff, vocab = 64, 256, 1000
	ts := []tensorSpec{{"token_embd.weight", []uint64{d, vocab}, embd}}
	for l := 0; l < layers; l++ {
		p := "blk." + string(rune('0'+l)) + "."
		ts = append(ts, tensorSpec{p + "attn_norm.weight", []uint64{d}, norm})
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_output"} {
			ts = append(ts, tensorSpec{p + n + ".weight", []uint64{d, d}, typeOf(l, n)})
		}
		ts = append(ts, tensorSpec{p + "ffn_gate.weight", []uint64{d, ff}, typeOf(l, "ffn_gate")})
		ts = append(ts, tensorSpec{p + "ffn_up.weight", []uint64{d, ff}, typeOf(l, "ffn_up")})
		ts = append(ts, tensorSpec{p + "ffn_down.weight", []uint64{ff, d}, typeOf(l, "ffn_down")})
	}
	ts = append(ts, tensorSpec{"output_norm.weight", []uint64{d}, tF32})
	return append(ts, tensorSpec{"output.weight", []uint64{d, vocab}, head})
}

func uniform(t uint32) func(int, string) uint32 { return func(int, string) uint32 { return t } }

func q8File() ggufSpec {
	return ggufSpec{fileType: 7, tensors: model(2, tQ8_0, tQ8_0, tF32, uniform(tQ8_0))}
}

func TestReadGGUF(t *testing.T) {
	// llama-quantize's Q4_K_M: q6_K for output, for half the attn_v and
	// ffn_down, the rest q4_K.
	q4km := func(l int, n string) uint32 {
		if (n == "attn_v" || n == "ffn_down") && l%2 == 0 {
			return tQ6_K
		}
		return tQ4_K
	}
	tests := []struct {
		name     string
		spec     ggufSpec
		dominant key.Quant
		fileType int
		types    map[string]int
	}{
		{"Q4_0 with q6_K output", ggufSpec{fileType: 2, tensors: model(2, tQ4_0, tQ6_K, tF32, uniform(tQ4_0))}, key.QuantQ4_0, 2,
			map[string]int{"q4_0": 15, "q6_K": 1}},
		{"Q4_K_M mix", ggufSpec{fileType: 15, tensors: model(4, tQ4_K, tQ6_K, tF32, q4km)}, key.QuantQ4_K, 15,
			map[string]int{"q4_K": 25, "q6_K": 5}},
		{"small model: q6_K embeddings and head outweigh the body", ggufSpec{fileType: 2, tensors: model(1, tQ6_K, tQ6_K, tF32, uniform(tQ4_0))}, key.QuantQ4_0, 2,
			map[string]int{"q4_0": 7, "q6_K": 2}},
		{"Q8_0", q8File(), key.QuantQ8_0, 7, map[string]int{"q8_0": 16}},
		{"F16", ggufSpec{fileType: 1, tensors: model(1, tF16, tF16, tF32, uniform(tF16))}, key.QuantF16, 1, map[string]int{"f16": 9}},
		{"BF16 v2", ggufSpec{version: 2, fileType: 32, tensors: model(1, tBF16, tBF16, tF32, uniform(tBF16))}, key.QuantBF16, 32, map[string]int{"bf16": 9}},
		{"MXFP4 experts beat bf16 attention", ggufSpec{fileType: 38, tensors: model(2, tBF16, tBF16, tF32, func(_ int, n string) uint32 {
			if strings.HasPrefix(n, "ffn") {
				return tMXFP4
			}
			return tBF16
		})}, key.QuantMXFP4, 38, map[string]int{"mxfp4": 6, "bf16": 10}},
		{"IQ4_XS", ggufSpec{fileType: 30, tensors: model(1, tQ4_K, tQ6_K, tF32, uniform(tIQ4_XS))}, key.QuantIQ, 30, map[string]int{"iq4_xs": 7, "q4_K": 1, "q6_K": 1}},
		// The q6_K head alone outweighs the q4_0 body (64000 against
		// 4096 elements); the dominant type must still be the body's.
		{"q6_K output head outweighs a small body", ggufSpec{fileType: 2, tensors: []tensorSpec{
			{"token_embd.weight", []uint64{64, 1000}, tQ4_0},
			{"blk.0.attn_q.weight", []uint64{64, 64}, tQ4_0},
			{"output.weight", []uint64{64, 1000}, tQ6_K},
		}}, key.QuantQ4_0, 2, map[string]int{"q4_0": 2, "q6_K": 1}},
		{"only embeddings left counts them", ggufSpec{tensors: []tensorSpec{{"token_embd.weight", []uint64{4, 4}, tQ8_0}}}, key.QuantQ8_0, -1, map[string]int{"q8_0": 1}},
		{"no tensors: file_type", ggufSpec{fileType: 15}, key.QuantQ4_K, 15, map[string]int{}},
		{"no tensors, no file_type", ggufSpec{}, key.QuantOther, -1, map[string]int{}},
		{"unknown type id", ggufSpec{tensors: []tensorSpec{{"blk.0.x.weight", []uint64{4, 4}, 77}}}, key.QuantOther, -1, map[string]int{"type77": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info, err := ReadGGUF(bytes.NewReader(encodeGGUF(tt.spec)))
			if err != nil {
				t.Fatal(err)
			}
			if info.Dominant != tt.dominant || info.FileType != tt.fileType {
				t.Errorf("Dominant %s FileType %d; want %s %d", info.Dominant, info.FileType, tt.dominant, tt.fileType)
			}
			if len(info.TensorTypes) != len(tt.types) {
				t.Errorf("TensorTypes %v, want %v", info.TensorTypes, tt.types)
			}
			for k, v := range tt.types {
				if info.TensorTypes[k] != v {
					t.Errorf("TensorTypes %v, want %v", info.TensorTypes, tt.types)
				}
			}
			if info.Architecture != "llama" || info.Name != "synthetic llama" || uint64(len(tt.spec.tensors)) != info.TensorCount {
				t.Errorf("header %+v", info)
			}
			if info.Meta["llama.rope.freq_base"] != float64(10000) || info.Meta["general.bool"] != true {
				t.Errorf("Meta %v", info.Meta)
			}
			if _, ok := info.Meta["tokenizer.ggml.tokens"]; ok {
				t.Error("arrays must not be kept in Meta")
			}
		})
	}
}

// Every prefix of a valid header must fail cleanly, with or without the
// size known, and name the offset.
func TestReadGGUFTruncated(t *testing.T) {
	full := encodeGGUF(ggufSpec{fileType: 15, tensors: model(1, tQ4_K, tQ6_K, tF32, uniform(tQ4_K))})
	headerEnd := len(full) - 32
	for n := 0; n < headerEnd; n++ {
		if _, err := ReadGGUF(bytes.NewReader(full[:n])); err == nil || !strings.Contains(err.Error(), "at byte") {
			t.Fatalf("prefix %d (sized): err = %v", n, err)
		}
		_, err := ReadGGUF(struct{ *bytes.Reader }{bytes.NewReader(full[:n])}) // size unknown
		if err == nil || !errors.Is(err, ErrTruncated) && !strings.Contains(err.Error(), "at byte") {
			t.Fatalf("prefix %d (stream): err = %v", n, err)
		}
	}
	if _, err := ReadGGUF(bytes.NewReader(full[:headerEnd])); err != nil {
		t.Fatalf("the header alone must read: %v", err)
	}
}

func TestReadGGUFBad(t *testing.T) {
	le := func(parts ...any) []byte {
		var b bytes.Buffer
		for _, p := range parts {
			if s, ok := p.(string); ok {
				b.WriteString(s)
				continue
			}
			binary.Write(&b, binary.LittleEndian, p)
		}
		return b.Bytes()
	}
	huge := uint64(1) << 62
	tests := []struct {
		name string
		in   []byte
		err  string
	}{
		{"bad magic", []byte("GGML\x03\x00\x00\x00"), `bad magic "GGML"`},
		{"version 1", le("GGUF", uint32(1)), "version 1"},
		{"big endian", le("GGUF", uint32(3<<24)), "big-endian"},
		{"version 4", le("GGUF", uint32(4)), "unsupported GGUF version 4"},
		{"absurd tensor count", le("GGUF", uint32(3), huge, uint64(0)), "tensor count"},
		{"absurd kv count", le("GGUF", uint32(3), uint64(0), huge), "kv count"},
		{"absurd key length", le("GGUF", uint32(3), uint64(0), uint64(1), huge, make([]byte, 64)), "exceeds the 1048576-byte limit"},
		{"key longer than file", le("GGUF", uint32(3), uint64(0), uint64(1), uint64(1000), "ab", make([]byte, 64)), "runs past the end"},
		{"bad value type", le("GGUF", uint32(3), uint64(0), uint64(1), uint64(1), "k", uint32(13)), "not a GGUF type"},
		{"nested array", le("GGUF", uint32(3), uint64(0), uint64(1), uint64(1), "k", uint32(9), uint32(9), uint64(1)), "array of arrays"},
		{"absurd array", le("GGUF", uint32(3), uint64(0), uint64(1), uint64(1), "k", uint32(9), uint32(12), huge, make([]byte, 64)), "array elements"},
		{"array past end", le("GGUF", uint32(3), uint64(0), uint64(1), uint64(1), "k", uint32(9), uint32(12), uint64(100), make([]byte, 64)), "runs past the end"},
		{"string array past end", le("GGUF", uint32(3), uint64(0), uint64(1), uint64(1), "k", uint32(9), uint32(8), uint64(1000), make([]byte, 64)), "claims 1000 strings"},
		{"too many dims", le("GGUF", uint32(3), uint64(1), uint64(0), uint64(1), "t", uint32(5), make([]byte, 64)), "5 dimensions"},
		{"dim overflow", le("GGUF", uint32(3), uint64(1), uint64(0), uint64(1), "t", uint32(2), huge, huge, uint32(0), uint64(0)), "overflows"},
		// Issue 33: counts the bytes could hold but no real header declares.
		{"declares 3 million tensors", le("GGUF", uint32(3), uint64(3_000_000), uint64(0), make([]byte, 3_000_000*minTensorBytes)), "tensor count 3000000 is over the 65536"},
		{"declares 100,000 kvs", le("GGUF", uint32(3), uint64(0), uint64(100_000), make([]byte, 100_000*minKVBytes)), "kv count 100000 is over the 65536"},
		{"string arrays past the budget", le("GGUF", uint32(3), uint64(0), uint64(1), uint64(1), "k", uint32(9), uint32(8), uint64(maxGGUFStrings+1), make([]byte, 8*(maxGGUFStrings+1))), "past 4194304 strings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadGGUF(bytes.NewReader(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), "at byte") {
				t.Fatalf("err = %v, want %q with an offset", err, tt.err)
			}
		})
	}
}

func FuzzReadGGUF(f *testing.F) {
	f.Add(encodeGGUF(q8File()))
	f.Add(encodeGGUF(ggufSpec{fileType: 15, tensors: model(1, tQ4_K, tQ6_K, tF32, uniform(tQ4_K))}))
	f.Add(encodeGGUF(ggufSpec{version: 2}))
	f.Add([]byte("GGUF"))
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, r := range []func() (*GGUFInfo, error){
			func() (*GGUFInfo, error) { return ReadGGUF(bytes.NewReader(in)) },
			func() (*GGUFInfo, error) { return ReadGGUF(struct{ io.Reader }{bytes.NewReader(in)}) },
		} {
			info, err := r()
			if err != nil {
				if info != nil {
					t.Fatal("info with an error")
				}
				continue
			}
			if info.Version != 2 && info.Version != 3 {
				t.Fatalf("version %d accepted", info.Version)
			}
			n := 0
			for _, c := range info.TensorTypes {
				n += c
			}
			if uint64(n) > info.TensorCount || info.Dominant == "" {
				t.Fatalf("inconsistent %+v", info)
			}
		}
	})
}

// BenchmarkReadGGUFMostTensors reads a header declaring the most tensors a
// header may (maxGGUFTensors, 2-D each, names as llama.cpp writes them):
// the worst time and memory a GGUF's tensor table can cost. Before the
// bound, a 168 MB header declaring 3 million took 8.2 s and 414 MB.
func BenchmarkReadGGUFMostTensors(b *testing.B) {
	var buf bytes.Buffer
	w := func(v any) { binary.Write(&buf, binary.LittleEndian, v) }
	buf.WriteString("GGUF")
	w(uint32(3))
	w(uint64(maxGGUFTensors))
	w(uint64(0))
	for i := 0; i < maxGGUFTensors; i++ {
		name := fmt.Sprintf("blk.%d.ffn_down.weight", i)
		w(uint64(len(name)))
		buf.WriteString(name)
		w(uint32(2))
		w(uint64(4096))
		w(uint64(4096))
		w(uint32(12)) // q4_K
		w(uint64(0))
	}
	in := buf.Bytes()
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		info, err := ReadGGUF(bytes.NewReader(in))
		if err != nil || info.Dominant != key.QuantQ4_K {
			b.Fatal(info, err)
		}
	}
}
