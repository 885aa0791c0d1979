// Package key holds the vocabulary every other package shares: engine names,
// drafter kinds, target quantizations, CUDA compute capabilities, and the
// (engine, drafter, capability, quant) key that a measured policy entry is
// looked up by. It is pure data with parsers; nothing here does I/O.
package key

import (
	"errors"
	"fmt"
	"github.com/speclaunch/speclaunch/internal/quote"
	"github.com/speclaunch/speclaunch/internal/typo"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Engine names an inference server the launcher can start.
type Engine string

const (
	MLXCEL   Engine = "mlxcel"
	LlamaCpp Engine = "llama.cpp"
	Sim      Engine = "sim"
	// VLLM is vLLM's OpenAI-compatible server (`vllm serve`).
	VLLM Engine = "vllm"
	// SGLang is SGLang's server (`python -m sglang.launch_server`).
	SGLang Engine = "sglang"
)

// Engines lists every engine the launcher knows, in help order.
var Engines = []Engine{MLXCEL, LlamaCpp, VLLM, SGLang, Sim}

// Switch is how serve replaces an engine: the setting server.switch
// (auto, overlap, drain), read once by config, and, with no proxy,
// direct. One type from the setting to the runtime's machine
// (server.Job.Mode); serve resolves auto before it asks for a switch.
type Switch string

const (
	// SwitchAuto: drain when two copies of the engine would not fit in GPU
	// memory, overlap otherwise.
	SwitchAuto Switch = "auto"
	// SwitchOverlap starts the new engine beside the serving one, routes
	// to it once it is ready, then drains the old one.
	SwitchOverlap Switch = "overlap"
	// SwitchDrain holds new requests, lets the old engine finish, stops
	// it, then starts the new one.
	SwitchDrain Switch = "drain"
	// SwitchDirect (no proxy) stops the old engine, then starts the new
	// one on the same public address: nothing can be held.
	SwitchDirect Switch = "direct"
	// SwitchAlone: nothing serves (the engine exited or hung): the new
	// engine starts alone while requests are held. Never an operator's
	// choice; it names restarts in records and metrics, which called them
	// overlap.
	SwitchAlone Switch = "alone"
)

func (s Switch) String() string { return string(s) }

// engineSpellings are the names ParseEngine accepts and the engine each
// names, the names first (a typo is told the earliest nearest).
var engineSpellings = []struct {
	spelt string
	e     Engine
}{
	{"mlxcel", MLXCEL}, {"llama.cpp", LlamaCpp}, {"vllm", VLLM}, {"sglang", SGLang}, {"sim", Sim},
	{"mlxcel-server", MLXCEL}, {"llamacpp", LlamaCpp}, {"llama-cpp", LlamaCpp}, {"llama-server", LlamaCpp},
	{"llama", LlamaCpp}, {"simulator", Sim}, {"vllm-serve", VLLM}, {"sgl", SGLang}, {"sglang.launch_server", SGLang},
}

// ParseEngine accepts the engine names and a few spellings operators use;
// a typo of one is told the name it meant (llama.ccp: did you mean
// llama.cpp?).
func ParseEngine(s string) (Engine, error) {
	given := strings.ToLower(strings.TrimSpace(s))
	names := make([]string, len(engineSpellings))
	for i, sp := range engineSpellings {
		if sp.spelt == given {
			return sp.e, nil
		}
		names[i] = sp.spelt
	}
	mean := ""
	if near := typo.NearestName(given, names); near != "" {
		mean = "did you mean " + near + "? "
	}
	return "", fmt.Errorf("unknown engine %s (%sknown: mlxcel, llama.cpp, vllm, sglang, sim)", quote.Quoted(s, 64), mean)
}

// hfRepoRE is a Hugging Face repo id: owner/name.
var hfRepoRE = regexp.MustCompile(`^[A-Za-z0-9][\w.-]*/[\w.-]+$`)

// FetchesModel reports whether engine e loads a model reference that is
// not a local path: vLLM and SGLang download a Hugging Face repo id
// ("meta-llama/Llama-3.1-8B-Instruct") and take "ngram" as n-gram drafting.
// Whether such a reference is instead a local directory is the caller's
// question (a relative "owner/name" may be either).
func FetchesModel(e Engine, ref string) bool {
	if e != VLLM && e != SGLang {
		return false
	}
	r := strings.TrimSpace(ref)
	return r == "ngram" || r == "[ngram]" || (hfRepoRE.MatchString(r) && !strings.HasPrefix(r, "."))
}

// Drafter names a kind of speculative drafter. The names are the launcher's
// own; each engine adapter maps them to its flag values (mlxcel --draft-kind,
// llama.cpp --spec-type draft-<kind>).
type Drafter string

const (
	DFlash      Drafter = "dflash"
	MTP         Drafter = "mtp"
	InternalMTP Drafter = "internal-mtp" // mlxcel's built-in head: detected, never selectable
	Draft       Drafter = "draft"        // a separate small draft model (llama.cpp draft-simple)
	DSpark      Drafter = "dspark"
	Eagle3      Drafter = "eagle3"
	Eagle       Drafter = "eagle" // an EAGLE(-1/2) head (vLLM method eagle, SGLang EAGLE)
	Ngram       Drafter = "ngram" // prompt lookup: no draft model (vLLM method ngram, SGLang NGRAM)
)

// Drafters lists every drafter kind the policy may name.
var Drafters = []Drafter{DFlash, MTP, InternalMTP, Draft, DSpark, Eagle3, Eagle, Ngram}

// ParseDrafter accepts a drafter kind, also in llama.cpp's "draft-<kind>"
// spelling ("draft-simple" is the plain draft model), vLLM's method names
// (draft_model) and SGLang's algorithm names (STANDALONE, NEXTN).
func ParseDrafter(s string) (Drafter, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	switch v {
	case "draft-simple", "simple", "draft", "draft_model", "draft-model", "standalone":
		return Draft, nil
	case "nextn":
		return MTP, nil
	}
	v = strings.TrimPrefix(v, "draft-")
	for _, d := range Drafters {
		if string(d) == v {
			return d, nil
		}
	}
	return "", fmt.Errorf("unknown drafter kind %s (known: dflash, mtp, draft, dspark, eagle3, eagle, ngram)", quote.Quoted(s, 64))
}

// Selectable reports the drafter kinds an operator may choose for an engine,
// in the launcher's vocabulary. The first is the engine's default kind.
func Selectable(e Engine) []Drafter {
	switch e {
	case LlamaCpp:
		return []Drafter{Draft, MTP, DFlash, DSpark, Eagle3}
	case VLLM, SGLang:
		// Both default to a separate draft model: vLLM's method is
		// draft_model when none is named (vllm/config/speculative.py),
		// SGLang's is STANDALONE.
		return []Drafter{Draft, Eagle, Eagle3, MTP, Ngram, DFlash}
	default: // mlxcel and sim speak mlxcel's --draft-kind
		return []Drafter{DFlash, MTP}
	}
}

// DefaultDrafter is the kind an engine assumes when nothing names one.
func DefaultDrafter(e Engine) Drafter { return Selectable(e)[0] }

// CheckSelectable returns an error naming the accepted kinds when d cannot be
// chosen on engine e.
func CheckSelectable(e Engine, d Drafter) error {
	if slices.Contains(Selectable(e), d) {
		return nil
	}
	if d == InternalMTP {
		return fmt.Errorf("drafter kind internal-mtp is not user-selectable; it is detected from the target")
	}
	names := make([]string, 0, 6)
	for _, k := range Selectable(e) {
		names = append(names, string(k))
	}
	return fmt.Errorf("drafter kind %q is not supported by engine %s (accepted: %s)", d, e, strings.Join(names, ", "))
}

// Quant is the target's weight format, which selects the engine's matmul
// kernel and so the cost of a verify block. MLX checkpoints classify as
// affine/nvfp4/other/unknown (upstream mlxcel's rules); GGUF files as their
// dominant tensor type.
type Quant string

const (
	QuantUnknown Quant = "unknown" // the target could not be read: distinct from unquantized
	QuantOther   Quant = "other"   // readable but neither affine nor nvfp4 (includes unquantized MLX)
	QuantAffine  Quant = "affine"
	QuantNVFP4   Quant = "nvfp4"
	QuantF32     Quant = "f32"
	QuantF16     Quant = "f16"
	QuantBF16    Quant = "bf16"
	QuantQ4_0    Quant = "q4_0"
	QuantQ4_1    Quant = "q4_1"
	QuantQ5_0    Quant = "q5_0"
	QuantQ5_1    Quant = "q5_1"
	QuantQ8_0    Quant = "q8_0"
	QuantQ2_K    Quant = "q2_k"
	QuantQ3_K    Quant = "q3_k"
	QuantQ4_K    Quant = "q4_k"
	QuantQ5_K    Quant = "q5_k"
	QuantQ6_K    Quant = "q6_k"
	QuantIQ      Quant = "iq"
	QuantMXFP4   Quant = "mxfp4"
	QuantTQ      Quant = "tq"
)

// Quants lists every quantization name the policy may use.
var Quants = []Quant{QuantUnknown, QuantOther, QuantAffine, QuantNVFP4, QuantF32, QuantF16, QuantBF16,
	QuantQ4_0, QuantQ4_1, QuantQ5_0, QuantQ5_1, QuantQ8_0, QuantQ2_K, QuantQ3_K, QuantQ4_K, QuantQ5_K, QuantQ6_K,
	QuantIQ, QuantMXFP4, QuantTQ}

// ParseQuant accepts a quantization name, case-insensitively; llama.cpp's
// file-type names such as Q4_K_M map to their tensor type (q4_k).
func ParseQuant(s string) (Quant, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	switch v {
	case "q4_k_m", "q4_k_s":
		v = "q4_k"
	case "q5_k_m", "q5_k_s":
		v = "q5_k"
	case "q3_k_m", "q3_k_s", "q3_k_l":
		v = "q3_k"
	case "none", "unquantized":
		v = "other"
	}
	for _, q := range Quants {
		if string(q) == v {
			return q, nil
		}
	}
	return "", fmt.Errorf("unknown quantization %s (known: affine, nvfp4, other, unknown, f16, bf16, f32, q4_0, q4_k, q8_0, q6_k, mxfp4, ...)", quote.Quoted(s, 64))
}

// Phrase renders a quantization in mlxcel's reason vocabulary.
func (q Quant) Phrase() string {
	switch q {
	case QuantAffine:
		return "an affine-quantized target"
	case QuantNVFP4:
		return "an NVFP4 target"
	case QuantOther:
		return "a target quantized neither affine nor NVFP4"
	case QuantUnknown, "":
		return "a target whose config.json could not be read"
	case QuantF16, QuantBF16, QuantF32:
		return "an unquantized " + strings.ToUpper(string(q)) + " target"
	}
	return "a " + strings.ToUpper(string(q)) + " target"
}

// Capability is a CUDA compute capability. The zero value means "no CUDA
// device", which never matches a measured entry.
type Capability struct {
	Major, Minor int
}

// None is the capability of a host with no usable CUDA device.
var None = Capability{}

// Known reports whether a device was found.
func (c Capability) Known() bool { return c.Major > 0 }

// String renders "9.0", or "none" when no device was found.
func (c Capability) String() string {
	if !c.Known() {
		return "none"
	}
	return fmt.Sprintf("%d.%d", c.Major, c.Minor)
}

// SM renders mlxcel's "sm_90" form, or "no CUDA device".
func (c Capability) SM() string {
	if !c.Known() {
		return "no CUDA device"
	}
	return fmt.Sprintf("sm_%d%d", c.Major, c.Minor)
}

// ErrCapabilityRange is wrapped by ParseCapability's error for a
// capability written right whose major version is outside 1 to 99.
var ErrCapabilityRange = errors.New("the major version is 1 to 99, e.g. 9.0 for H200 or 12.1 for GB10")

// ParseCapability accepts "9.0", "12.1" or "sm_90"/"sm_121" (the last digit
// is the minor version, as in CUDA's arch names), with a major version of
// 1 to 99.
func ParseCapability(s string) (Capability, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	bad := fmt.Errorf("malformed compute capability %s (want MAJOR.MINOR such as 9.0 or 12.1, or sm_90)", quote.Quoted(s, 64))
	var a, b string
	if rest, ok := strings.CutPrefix(v, "sm_"); ok {
		rest = strings.TrimRight(rest, "af")
		if len(rest) < 2 {
			return Capability{}, bad
		}
		a, b = rest[:len(rest)-1], rest[len(rest)-1:]
	} else if a, b, ok = strings.Cut(v, "."); !ok || len(b) != 1 {
		return Capability{}, bad
	}
	maj, err1 := strconv.Atoi(a)
	min, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || min < 0 || min > 9 {
		return Capability{}, bad
	}
	if maj < 1 || maj > 99 {
		return Capability{}, fmt.Errorf("%s is out of range: %w", quote.Quoted(s, 64), ErrCapabilityRange)
	}
	return Capability{maj, min}, nil
}

// Key identifies a measured policy entry.
type Key struct {
	Engine     Engine
	Drafter    Drafter
	Capability Capability
	Quant      Quant
}

func (k Key) String() string {
	return fmt.Sprintf("engine=%s drafter=%s capability=%s quant=%s", k.Engine, k.Drafter, k.Capability, k.Quant)
}

// Width limits shared by every surface. A width is the verify block: draft
// tokens per round plus the one row the target always computes.
const (
	MinWidth = 2
	MaxWidth = 256
)

// CheckWidth validates an operator width and says how to turn speculation
// off when the value would silently do so.
func CheckWidth(w int) error {
	switch {
	case w < 0:
		return fmt.Errorf("draft width %d is negative: a width is the verify block, draft tokens + 1; pick one from %d to %d", w, MinWidth, MaxWidth)
	case w < MinWidth:
		return fmt.Errorf("draft width %d is below %d: widths 0 and 1 silently disable speculation; to run without speculation, remove the draft model (or set draft.model = \"\" in the profile), and on llama.cpp a --spec-type draft-mtp with none", w, MinWidth)
	case w > MaxWidth:
		return fmt.Errorf("draft width %d is above %d, which no drafter runs; pick a width from %d to %d (verify rows = draft tokens + 1)", w, MaxWidth, MinWidth, MaxWidth)
	}
	return nil
}
