package checkpoint

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sort"
	"strings"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/safefile"
)

// GGUFInfo is what a GGUF header says about a model; tensor data is never
// read.
type GGUFInfo struct {
	Version      uint32
	Architecture string // general.architecture
	Name         string // general.name
	FileType     int    // general.file_type (llama_ftype, 15 = Q4_K_M); -1 when absent
	// TensorTypes counts weight tensors (2 or more dimensions) per ggml
	// type name ("q4_K", "q6_K", ...).
	TensorTypes map[string]int
	// Dominant is the type holding the most weight elements, which is
	// what selects the matmul kernels a verify block runs through.
	Dominant    key.Quant
	TensorCount uint64
	KVCount     uint64
	// Meta holds the scalar KVs (numbers, bools, strings up to 1 KiB);
	// arrays such as the vocabulary are skipped.
	Meta map[string]any
}

// GGUFMagic opens every GGUF file; serve checks a llama.cpp model for it.
const GGUFMagic = "GGUF"

// Limits: a string or array longer than these is not a header we can use,
// and refusing it early keeps hostile input from costing memory or time.
const (
	maxGGUFString = 1 << 20
	maxGGUFArray  = 1 << 30 // llama.cpp's GGUF_MAX_ARRAY_ELEMENTS
	maxGGUFCount  = 1 << 24 // tensors or KVs, when the size is unknown
	// The work a header declares is bounded by what real ones declare,
	// not only by the bytes it fits in: a 168 MB header declaring 3
	// million tensors took 8.2 s and 414 MB (issue 33). llama.cpp fuses a
	// layer's experts into one tensor (blk.N.ffn_*_exps), so even the
	// largest MoE checkpoints hold a few thousand tensors and a few dozen
	// KVs; their vocabularies (tokens and merges, one string each) are
	// under a million strings.
	maxGGUFTensors  = 1 << 16
	maxGGUFKVs      = 1 << 16
	maxGGUFStrings  = 1 << 22 // strings in all the header's string arrays
	maxMetaString   = 1 << 10
	maxGGUFDims     = 4 // GGML_MAX_DIMS
	minKVBytes      = 8 + 4 + 1
	minTensorBytes  = 8 + 4 + 4 + 8
	ggufTypeArray   = 9
	ggufTypeString  = 8
	ggufTypeCount   = 13
	ggufMagic       = GGUFMagic
	ggufMagicLength = 4
)

// ggmlTypes names ggml_type ids (ggml/include/ggml.h, llama.cpp d32676d).
// Ids missing here were removed (4, 5, 31-33, 36-38) or are newer than
// this table; they read as "type<N>".
var ggmlTypes = map[uint32]string{
	0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 9: "q8_1",
	10: "q2_K", 11: "q3_K", 12: "q4_K", 13: "q5_K", 14: "q6_K", 15: "q8_K",
	16: "iq2_xxs", 17: "iq2_xs", 18: "iq3_xxs", 19: "iq1_s", 20: "iq4_nl", 21: "iq3_s", 22: "iq2_s", 23: "iq4_xs",
	24: "i8", 25: "i16", 26: "i32", 27: "i64", 28: "f64", 29: "iq1_m", 30: "bf16",
	34: "tq1_0", 35: "tq2_0", 39: "mxfp4", 40: "nvfp4", 41: "q1_0", 42: "q2_0",
}

// ggmlQuant maps a ggml type to the policy's vocabulary; types no entry
// could key on (q8_1, q8_K, integer, f64, q1_0, q2_0, unknown) are other.
func ggmlQuant(t uint32) key.Quant {
	switch t {
	case 0:
		return key.QuantF32
	case 1:
		return key.QuantF16
	case 30:
		return key.QuantBF16
	case 2:
		return key.QuantQ4_0
	case 3:
		return key.QuantQ4_1
	case 6:
		return key.QuantQ5_0
	case 7:
		return key.QuantQ5_1
	case 8:
		return key.QuantQ8_0
	case 10:
		return key.QuantQ2_K
	case 11:
		return key.QuantQ3_K
	case 12:
		return key.QuantQ4_K
	case 13:
		return key.QuantQ5_K
	case 14:
		return key.QuantQ6_K
	case 16, 17, 18, 19, 20, 21, 22, 23, 29:
		return key.QuantIQ
	case 34, 35:
		return key.QuantTQ
	case 39:
		return key.QuantMXFP4
	case 40:
		return key.QuantNVFP4
	}
	return key.QuantOther
}

func ggmlName(t uint32) string {
	if n, ok := ggmlTypes[t]; ok {
		return n
	}
	return fmt.Sprintf("type%d", t)
}

// ReadGGUFFile reads the header of the GGUF file at path. The file must be
// a regular file (a directory, FIFO or device is refused before any read)
// and its header must end within safefile.GGUFLimit bytes.
// Reads stop when ctx ends (Ctrl-C during a header of hundreds of MiB on
// slow storage).
func ReadGGUFFile(ctx context.Context, path string) (*GGUFInfo, error) {
	f, err := safefile.Open(ctx, "GGUF file", path, safefile.GGUFLimit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := readGGUF(bufio.NewReaderSize(f, 1<<16), f.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return info, nil
}

// GGUFHeaderSize is the fixed start of every GGUF file: magic, version,
// tensor count, kv count.
const GGUFHeaderSize = 24

// HeaderOnlyGGUF is the smallest whole GGUF file: version 3, no tensors,
// no metadata. What tests give serve as a llama.cpp model, which a file
// cut short before its fixed header ends is not.
func HeaderOnlyGGUF() []byte {
	return append([]byte(ggufMagic), 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
}

// GGUFHeaderProblem checks the fixed header of a GGUF file of size bytes
// read from r (GGUFHeaderSize bytes, no more): a file cut short before it
// ends, or whose counts its size cannot hold, fails; the metadata after it
// is not read, so a model whose metadata runs past the cap passes.
func GGUFHeaderProblem(r io.Reader, size int64) error {
	g := &ggufReader{r: r, size: size, limit: safefile.GGUFLimit}
	_, err := g.header()
	return err
}

// ReadGGUF reads a GGUF header (magic, version 2 or 3, KVs, tensor infos)
// from r and stops before the tensor data. When r knows its size
// (Size() int64, as bytes.Reader and strings.Reader do), counts and
// lengths are also checked against the bytes left; either way nothing past
// safefile.GGUFLimit bytes is read.
func ReadGGUF(r io.Reader) (*GGUFInfo, error) {
	size := int64(-1)
	if s, ok := r.(interface{ Size() int64 }); ok {
		size = s.Size()
	}
	return readGGUF(r, size)
}

type ggufReader struct {
	r     io.Reader
	off   uint64
	size  int64 // -1 when unknown
	limit int64 // the header must end within this many bytes
	buf   [8]byte
	// strings counts the strings of string arrays read so far.
	strings uint64
}

// ErrTruncated is wrapped by every error for input that ends early.
var ErrTruncated = errors.New("truncated")

func (g *ggufReader) fail(at uint64, format string, a ...any) error {
	return fmt.Errorf("gguf: %s at byte %d", fmt.Sprintf(format, a...), at)
}

// remain is what may still be read: up to the end of the file or the
// header cap, whichever comes first.
func (g *ggufReader) remain() uint64 {
	end := uint64(g.limit)
	if g.size >= 0 && uint64(g.size) < end {
		end = uint64(g.size)
	}
	if end < g.off {
		return 0
	}
	return end - g.off
}

// end names what remain counts to, for messages.
func (g *ggufReader) end() string {
	if g.size < 0 || g.size > g.limit {
		return fmt.Sprintf("the %d MiB cap on a GGUF header (docs/file-limits.md)", g.limit>>20)
	}
	return "the end of the file"
}

func (g *ggufReader) read(n int, what string) ([]byte, error) {
	at := g.off
	if uint64(n) > g.remain() && g.size >= 0 && g.size <= g.limit {
		return nil, fmt.Errorf("gguf: %w reading %s at byte %d", ErrTruncated, what, at)
	}
	if uint64(n) > g.remain() {
		return nil, g.fail(at, "%s runs past %s", what, g.end())
	}
	k, err := io.ReadFull(g.r, g.buf[:n])
	g.off += uint64(k)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("gguf: %w reading %s at byte %d", ErrTruncated, what, at)
		}
		return nil, fmt.Errorf("gguf: reading %s at byte %d: %w", what, at, err)
	}
	return g.buf[:n], nil
}

func (g *ggufReader) u32(what string) (uint32, error) {
	b, err := g.read(4, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (g *ggufReader) u64(what string) (uint64, error) {
	b, err := g.read(8, what)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// skip discards n bytes.
func (g *ggufReader) skip(n uint64, what string) error {
	at := g.off
	if n > g.remain() {
		return g.fail(at, "%s of %d bytes runs past %s (%d left)", what, n, g.end(), g.remain())
	}
	k, err := io.CopyN(io.Discard, g.r, int64(n))
	g.off += uint64(k)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("gguf: %w reading %s at byte %d", ErrTruncated, what, at)
		}
		return fmt.Errorf("gguf: reading %s at byte %d: %w", what, at, err)
	}
	return nil
}

// str reads a GGUF string (u64 length + bytes). keep=false skips it.
func (g *ggufReader) str(what string, keep bool) (string, error) {
	at := g.off
	n, err := g.u64(what + " length")
	if err != nil {
		return "", err
	}
	if n > maxGGUFString {
		return "", g.fail(at, "%s length %d exceeds the %d-byte limit", what, n, maxGGUFString)
	}
	if n > g.remain() {
		return "", g.fail(at, "%s length %d runs past %s (%d left)", what, n, g.end(), g.remain())
	}
	if !keep {
		return "", g.skip(n, what)
	}
	// n is at most maxGGUFString and within what is left to read.
	b := make([]byte, n)
	k, err := io.ReadFull(g.r, b)
	g.off += uint64(k)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "", fmt.Errorf("gguf: %w reading %s at byte %d", ErrTruncated, what, at+8)
	}
	if err != nil {
		return "", fmt.Errorf("gguf: reading %s at byte %d: %w", what, at+8, err)
	}
	return string(b), nil
}

// scalarSize is the byte size of a fixed-size GGUF value type, 0 for
// string and array.
func scalarSize(t uint32) uint64 {
	switch t {
	case 0, 1, 7:
		return 1
	case 2, 3:
		return 2
	case 4, 5, 6:
		return 4
	case 10, 11, 12:
		return 8
	}
	return 0
}

// value reads one KV value of type t; it returns a Go value for scalars
// worth keeping and nil otherwise.
func (g *ggufReader) value(t uint32, key string, at uint64) (any, error) {
	what := fmt.Sprintf("value of %q", clipKey(key))
	switch t {
	case ggufTypeString:
		s, err := g.str(what, true)
		if err != nil || len(s) > maxMetaString {
			return nil, err
		}
		return s, nil
	case ggufTypeArray:
		return nil, g.array(key, what, at)
	}
	sz := scalarSize(t)
	if sz == 0 {
		return nil, g.fail(at, "key %q has value type %d, not a GGUF type", clipKey(key), t)
	}
	b, err := g.read(int(sz), what)
	if err != nil {
		return nil, err
	}
	switch t {
	case 0:
		return uint64(b[0]), nil
	case 1:
		return int64(int8(b[0])), nil
	case 2:
		return uint64(binary.LittleEndian.Uint16(b)), nil
	case 3:
		return int64(int16(binary.LittleEndian.Uint16(b))), nil
	case 4:
		return uint64(binary.LittleEndian.Uint32(b)), nil
	case 5:
		return int64(int32(binary.LittleEndian.Uint32(b))), nil
	case 6:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), nil
	case 7:
		return b[0] != 0, nil
	case 10:
		return binary.LittleEndian.Uint64(b), nil
	case 11:
		return int64(binary.LittleEndian.Uint64(b)), nil
	case 12:
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	}
	return nil, nil
}

// array reads (and skips) one KV array value, within the header's bounds.
func (g *ggufReader) array(key, what string, at uint64) error {
	et, err := g.u32("array type of " + what)
	if err != nil {
		return err
	}
	n, err := g.u64("array length of " + what)
	if err != nil {
		return err
	}
	if et == ggufTypeArray {
		return g.fail(at, "key %q holds an array of arrays, which GGUF readers refuse", clipKey(key))
	}
	if et >= ggufTypeCount {
		return g.fail(at, "key %q has array element type %d, not a GGUF type", clipKey(key), et)
	}
	if n > maxGGUFArray {
		return g.fail(at, "key %q has %d array elements, over the limit of %d", clipKey(key), n, maxGGUFArray)
	}
	if et == ggufTypeString {
		if n > g.remain()/8 {
			return g.fail(at, "key %q claims %d strings but only %d bytes are left", clipKey(key), n, g.remain())
		}
		if g.strings += n; g.strings > maxGGUFStrings {
			return g.fail(at, "key %q takes the header's string arrays past %d strings in all (a vocabulary is under a million)", clipKey(key), maxGGUFStrings)
		}
		for i := uint64(0); i < n; i++ {
			if _, err := g.str(what, false); err != nil {
				return err
			}
		}
		return nil
	}
	sz := scalarSize(et)
	hi, lo := bits.Mul64(n, sz)
	if hi != 0 {
		return g.fail(at, "key %q array of %d elements overflows", clipKey(key), n)
	}
	return g.skip(lo, what)
}

func clipKey(k string) string {
	if len(k) > 64 {
		return k[:64] + "..."
	}
	return k
}

// readGGUF reads a GGUF header (never the tensor data): the fixed header,
// the key/value metadata, then the tensor infos, whose types give the
// dominant weight type. size bounds every count read, so a hostile header
// cannot ask for more than the file holds.
func readGGUF(r io.Reader, size int64) (*GGUFInfo, error) {
	g := &ggufReader{r: r, size: size, limit: safefile.GGUFLimit}
	info, err := g.header()
	if err != nil {
		return nil, err
	}
	if err := g.metadata(info); err != nil {
		return nil, err
	}
	// Tensors are summed as they are read, never kept: memory stays flat
	// whatever the header declares.
	sums := weightSums{body: map[uint32]uint64{}, all: map[uint32]uint64{}}
	for i := uint64(0); i < info.TensorCount; i++ {
		t, err := g.tensor(i)
		if err != nil {
			return nil, err
		}
		if t.dims >= 2 {
			sums.add(t)
			info.TensorTypes[ggmlName(t.typ)]++
		}
	}
	info.Dominant = sums.dominant(info.FileType)
	return info, nil
}

// header reads the magic, the version (2 or 3, little-endian) and the two
// counts, refusing counts the rest of the file cannot hold.
func (g *ggufReader) header() (*GGUFInfo, error) {
	magic, err := g.read(ggufMagicLength, "magic")
	if err != nil {
		return nil, err
	}
	if string(magic) != ggufMagic {
		return nil, g.fail(0, "bad magic %q (want %q): not a GGUF file", magic, ggufMagic)
	}
	info := &GGUFInfo{FileType: -1, TensorTypes: map[string]int{}, Meta: map[string]any{}}
	if info.Version, err = g.u32("version"); err != nil {
		return nil, err
	}
	switch {
	case info.Version == 2 || info.Version == 3:
	case info.Version == 1:
		return nil, g.fail(4, "GGUF version 1 (32-bit counts) is not supported; re-convert the model")
	case bits.ReverseBytes32(info.Version) == 2 || bits.ReverseBytes32(info.Version) == 3:
		return nil, g.fail(4, "big-endian GGUF is not supported")
	default:
		return nil, g.fail(4, "unsupported GGUF version %d (want 2 or 3)", info.Version)
	}
	if info.TensorCount, err = g.u64("tensor count"); err != nil {
		return nil, err
	}
	if info.KVCount, err = g.u64("kv count"); err != nil {
		return nil, err
	}
	if info.TensorCount > maxGGUFCount || info.TensorCount > g.remain()/minTensorBytes {
		return nil, g.fail(8, "tensor count %d is impossible for the %d bytes after the %d-byte header", info.TensorCount, g.remain(), g.off)
	}
	if info.KVCount > maxGGUFCount || info.KVCount > g.remain()/minKVBytes {
		return nil, g.fail(16, "kv count %d is impossible for the %d bytes after the %d-byte header", info.KVCount, g.remain(), g.off)
	}
	if info.TensorCount > maxGGUFTensors {
		return nil, g.fail(8, "tensor count %d is over the %d a GGUF header may declare (real models hold a few thousand)", info.TensorCount, maxGGUFTensors)
	}
	if info.KVCount > maxGGUFKVs {
		return nil, g.fail(16, "kv count %d is over the %d a GGUF header may declare (real models hold a few dozen)", info.KVCount, maxGGUFKVs)
	}
	return info, nil
}

// metadata reads the key/value pairs into info.Meta and takes the
// architecture, name and file type from them.
func (g *ggufReader) metadata(info *GGUFInfo) error {
	for i := uint64(0); i < info.KVCount; i++ {
		at := g.off
		k, err := g.str(fmt.Sprintf("key %d", i), true)
		if err != nil {
			return err
		}
		t, err := g.u32(fmt.Sprintf("type of %q", clipKey(k)))
		if err != nil {
			return err
		}
		v, err := g.value(t, k, at)
		if err != nil {
			return err
		}
		if v != nil {
			info.Meta[k] = v
		}
	}
	if s, ok := info.Meta["general.architecture"].(string); ok {
		info.Architecture = s
	}
	if s, ok := info.Meta["general.name"].(string); ok {
		info.Name = s
	}
	switch v := info.Meta["general.file_type"].(type) {
	case uint64:
		if v <= math.MaxInt32 {
			info.FileType = int(v)
		}
	case int64:
		if v >= 0 && v <= math.MaxInt32 {
			info.FileType = int(v)
		}
	}
	return nil
}

type tensorInfo struct {
	name     string
	dims     uint32
	typ      uint32
	elements uint64
}

func (g *ggufReader) tensor(i uint64) (tensorInfo, error) {
	t, err := g.tensorFields()
	if err != nil {
		// The labels of the reads are constant (a header may declare
		// 65,536 tensors); which tensor it was is said once, here.
		return t, fmt.Errorf("%w (tensor %d)", err, i)
	}
	return t, nil
}

func (g *ggufReader) tensorFields() (tensorInfo, error) {
	at := g.off
	var t tensorInfo
	var err error
	if t.name, err = g.str("tensor name", true); err != nil {
		return t, err
	}
	if t.dims, err = g.u32("tensor dimension count"); err != nil {
		return t, err
	}
	if t.dims > maxGGUFDims {
		return t, g.fail(at, "tensor %q has %d dimensions (at most %d)", clipKey(t.name), t.dims, maxGGUFDims)
	}
	t.elements = 1
	for d := uint32(0); d < t.dims; d++ {
		n, err := g.u64("tensor dimension")
		if err != nil {
			return t, err
		}
		if n > math.MaxInt64 {
			return t, g.fail(at, "tensor %q dimension %d is %d, out of range", clipKey(t.name), d, n)
		}
		hi, lo := bits.Mul64(t.elements, n)
		if hi != 0 || lo > math.MaxInt64 {
			return t, g.fail(at, "tensor %q element count overflows", clipKey(t.name))
		}
		t.elements = lo
	}
	if t.typ, err = g.u32("tensor type"); err != nil {
		return t, err
	}
	if _, err = g.u64("tensor offset"); err != nil {
		return t, err
	}
	return t, nil
}

// weightSums adds up weight elements by ggml type over the 2-D and larger
// tensors: body leaves out the token embedding and the output head, all
// does not.
type weightSums struct {
	body, all map[uint32]uint64
}

func (w weightSums) add(t tensorInfo) {
	addSat(w.all, t.typ, t.elements)
	if !isEmbedOrHead(t.name) {
		addSat(w.body, t.typ, t.elements)
	}
}

func addSat(m map[uint32]uint64, typ uint32, n uint64) {
	s, carry := bits.Add64(m[typ], n, 0)
	if carry != 0 {
		s = math.MaxUint64
	}
	m[typ] = s
}

// dominant picks the ggml type holding the most weight elements among
// 2-D and larger tensors. The token embedding and the output head are
// left out when anything else exists: llama-quantize keeps them at a
// higher precision (a Q4_0 file's output.weight is q6_K), and they are
// not what the verify block's matmuls mostly run through. With no weight
// tensors (a split model's first shard can hold none) general.file_type
// answers instead.
func (w weightSums) dominant(fileType int) key.Quant {
	sum := w.body
	if len(sum) == 0 {
		sum = w.all
	}
	if len(sum) == 0 {
		return fileTypeQuant(fileType)
	}
	types := make([]uint32, 0, len(sum))
	for t := range sum {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool {
		if sum[types[i]] != sum[types[j]] {
			return sum[types[i]] > sum[types[j]]
		}
		return types[i] < types[j]
	})
	return ggmlQuant(types[0])
}

func isEmbedOrHead(name string) bool {
	return name == "output.weight" || strings.HasPrefix(name, "token_embd.")
}

// fileTypeQuant maps llama_ftype (include/llama.h) to the tensor type it
// is mostly made of.
func fileTypeQuant(ft int) key.Quant {
	switch ft {
	case 0:
		return key.QuantF32
	case 1:
		return key.QuantF16
	case 2:
		return key.QuantQ4_0
	case 3:
		return key.QuantQ4_1
	case 7:
		return key.QuantQ8_0
	case 8:
		return key.QuantQ5_0
	case 9:
		return key.QuantQ5_1
	case 10, 21:
		return key.QuantQ2_K
	case 11, 12, 13:
		return key.QuantQ3_K
	case 14, 15:
		return key.QuantQ4_K
	case 16, 17:
		return key.QuantQ5_K
	case 18:
		return key.QuantQ6_K
	case 19, 20, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31:
		return key.QuantIQ
	case 32:
		return key.QuantBF16
	case 36, 37:
		return key.QuantTQ
	case 38:
		return key.QuantMXFP4
	case 39:
		return key.QuantNVFP4
	}
	return key.QuantOther
}
