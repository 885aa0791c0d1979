package checkpoint

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/quote"
)

// Upstream's exact reasons for a checkpoint-declared width
// (BlockSizeSource::DrafterCheckpoint in mlxcel's speculative_args.rs), so
// the launcher's log and mlxcel's block_size_from= read the same.
const (
	ReasonQwen35MTP = "the Qwen 3.5 MTP drafter's configured block size"
	ReasonInkling   = "the Inkling MTP drafter's layer count"
	ReasonGLM4MTP   = "the GLM 4 MoE Lite MTP drafter's configured block size"
	ReasonDSpark    = "the DSpark drafter's runtime verify width"
	ReasonMuse      = "the Muse Glimmer assistant's configured block size"
)

// DSpark widths (mlxcel_core::drafter::dflash).
const (
	dsparkDefaultVerifyWidth = 8
	dsparkMaxVerifyWidth     = 32
	museDefaultBlockSize     = 16
)

// DeclaredWidth applies upstream's checkpoint peeks in upstream's order
// (resolve_draft_block_size_detailed steps 2-6) and returns the width the
// drafter at drafterPath declares, with upstream's reason. MTP kinds try
// the Qwen 3.5 MTP block_size, the Inkling layer count + 2, and the GLM 4
// MoE Lite block_size; DFlash (and DSpark, which mlxcel runs as dflash)
// try the DSpark runtime verify width and the Muse Glimmer block size.
// ok is false when nothing declares a width: a plain DFlash drafter, a
// missing or unreadable config, or a same-named field on another family
// (gemma4_assistant's block_size is not a width).
//
// The width is upstream's, verbatim: 0 or 1 can come back from a config
// that says so, and the caller must validate it (key.CheckWidth).
// The read stops when ctx ends.
func DeclaredWidth(ctx context.Context, kind key.Drafter, drafterPath string) (width int, reason string, ok bool) {
	d := Declare(ctx, kind, drafterPath)
	return d.Width, d.Reason, d.OK
}

// Declaration is what a drafter's config.json says of its width.
type Declaration struct {
	Width  int    // the width upstream's peeks read, verbatim (0 and 1 included)
	Reason string // upstream's reason for Width
	OK     bool   // a peek read a width
	// Unread, when not "", says that the drafter family's block_size (or
	// Inkling's num_mtp_layers) is there but no peek takes a width from it (a negative number, a
	// fraction, a string, past u32, under the Muse assistant's 2), and the
	// fix. Upstream drops such a value without a word and resolves the
	// width as if the key were absent (issue 33: -1 was dropped silently).
	Unread string
}

// Declare is DeclaredWidth with what the config holds that no peek reads.
func Declare(ctx context.Context, kind key.Drafter, drafterPath string) Declaration {
	raw, err := readConfig(ctx, drafterPath)
	if err != nil {
		return Declaration{}
	}
	return declare(kind, raw)
}

// declare is Declare over config.json's bytes.
func declare(kind key.Drafter, raw []byte) Declaration {
	var d Declaration
	d.Width, d.Reason, d.OK = declaredWidth(kind, raw)
	if cfg, err := parseJSON(raw); err == nil {
		d.Unread = unreadBlockSize(kind, cfg, d.Reason)
	}
	return d
}

// unreadBlockSize is the sentence for a block_size the drafter's family
// declares a width by (for its kind) that upstream's peek took no width
// from; "" when there is none, or when the value is a width and another
// field failed the peek. reason is the peeks' answer: a block_size read
// by its family's own peek is never unread.
func unreadBlockSize(kind key.Drafter, cfg *jval, reason string) string {
	if cfg == nil || cfg.kind != jobj {
		return ""
	}
	var v *jval
	least, valid, also := uint64(key.MinWidth), fmt.Sprintf("a width %d to %d", key.MinWidth, key.MaxWidth), ""
	mt, _ := cfg.get("model_type").asStr()
	switch own := map[string]string{"qwen3_5_mtp": ReasonQwen35MTP, "glm4_moe_lite_mtp": ReasonGLM4MTP}[mt]; {
	case own != "" && (kind == key.MTP || kind == key.DFlash):
		if reason == own || cfg.dups["block_size"] {
			return ""
		}
		if v = cfg.obj["block_size"]; v != nil && v.kind == jnull {
			return "" // Option<usize>: null is no declaration, as upstream reads it
		}
		if kind != key.MTP {
			// One peek reads model_type and block_size: the kind was not
			// read either and fell back to dflash (drafterFromConfig).
			also = fmt.Sprintf(", nor the kind from model_type %s (so %s)", mt, kind)
		}
	case (kind == key.DFlash || kind == key.DSpark) && reason != ReasonDSpark && reason != ReasonMuse:
		if isMuse(cfg) {
			flat, _ := lift(cfg, "block_size")
			v = flat.obj["block_size"]
		} else if r, ok := cfg.get("markov_rank").asU64(); ok && r > 0 {
			// DSpark's block_size counts proposals: the verify width is one more.
			v, least, valid = cfg.obj["block_size"], 0, fmt.Sprintf("the proposals, 1 to %d (the width is one more)", dsparkMaxVerifyWidth-1)
		}
	}
	why := whyNotWidth(v, least)
	if why == "" {
		return unreadLayers(kind, cfg, reason)
	}
	return fmt.Sprintf("block_size %s %s: no width is read from it%s; set %s or remove the key", v.show(), why, also, valid)
}

// unreadLayers is unreadBlockSize for the Inkling MTP peek, which reads
// text_config.num_mtp_layers (the width is two more) when the Qwen 3.5
// MTP peek read nothing: "" when it read it, or nothing is there (null
// included, as for the other peeks' Option fields).
func unreadLayers(kind key.Drafter, cfg *jval, reason string) string {
	tc := cfg.get("text_config")
	v := tc.get("num_mtp_layers")
	if kind != key.MTP || reason == ReasonQwen35MTP || reason == ReasonInkling || v == nil || v.kind == jnull {
		return ""
	}
	why := whyNotWidth(v, 0)
	if why == "" && v.u > math.MaxUint32-2 {
		why = fmt.Sprintf("is above %d", uint64(math.MaxUint32-2))
	}
	if why == "" {
		return ""
	}
	return fmt.Sprintf("text_config.num_mtp_layers %s %s: no width is read from it; set the MTP layer count, 0 to %d (the width is two more), or remove the key", v.show(), why, key.MaxWidth-2)
}

// whyNotWidth says why v is no block_size a peek reads, "" when it is one
// (a whole number from least up to u32) or absent.
func whyNotWidth(v *jval, least uint64) string {
	if v == nil {
		return ""
	}
	switch v.kind {
	case jnull:
		return "is null, which this config may not hold"
	case jnum:
		switch {
		case v.nk == numI64 || v.nk == numF64 && v.f < 0:
			return "is negative"
		case v.nk == numF64 && v.f == math.Trunc(v.f) && v.f > math.MaxUint32:
			return fmt.Sprintf("is above %d", uint64(math.MaxUint32))
		case v.nk == numF64:
			return "is not an integer as written (a fraction or an exponent)"
		case v.u > math.MaxUint32:
			return fmt.Sprintf("is above %d", uint64(math.MaxUint32))
		case v.u < least:
			return fmt.Sprintf("is below %d, this config's least", least)
		}
		return ""
	case jstr:
		return "is a string, not a number"
	case jbool:
		return "is true or false, not a number"
	}
	return "is a list or a table, not a number"
}

// declaredWidth is DeclaredWidth over config.json's bytes.
func declaredWidth(kind key.Drafter, raw []byte) (int, string, bool) {
	cfg, err := parseJSON(raw)
	if err != nil {
		return 0, "", false
	}
	switch kind {
	case key.MTP:
		if p, ok := peekStruct(cfg); ok && p.modelType == "qwen3_5_mtp" && p.hasBlockSize {
			if w, ok := fitsU32(p.blockSize); ok {
				return w, ReasonQwen35MTP, true
			}
		}
		if n, ok := cfg.get("text_config").get("num_mtp_layers").asU64(); ok && cfg.get("text_config").kind == jobj && n <= math.MaxUint64-2 {
			if w, ok := fitsU32(n + 2); ok {
				return w, ReasonInkling, true
			}
		}
		if p, ok := peekStruct(cfg); ok && p.modelType == "glm4_moe_lite_mtp" && p.hasBlockSize {
			if w, ok := fitsU32(p.blockSize); ok {
				return w, ReasonGLM4MTP, true
			}
		}
	case key.DFlash, key.DSpark:
		if n, ok := dsparkWidth(cfg); ok {
			if w, ok := fitsU32(n); ok {
				return w, ReasonDSpark, true
			}
		}
		if n, ok := museWidth(cfg); ok {
			if w, ok := fitsU32(n); ok {
				return w, ReasonMuse, true
			}
		}
	}
	return 0, "", false
}

// fitsU32 is upstream's u32::try_from on the peeked usize.
func fitsU32(n uint64) (int, bool) {
	if n > math.MaxUint32 {
		return 0, false
	}
	return int(n), true
}

// peek is upstream's DrafterConfigPeek { model_type: Option<String>,
// block_size: Option<usize> }, deserialized straight from the file.
type peek struct {
	modelType    string
	hasModelType bool
	blockSize    uint64
	hasBlockSize bool
}

// peekStruct deserializes cfg the way serde's derive does for
// DrafterConfigPeek: an object (unknown keys ignored, a repeated known
// key refused) or an array of at most two elements in field order; a
// present field of the wrong type fails the whole peek.
func peekStruct(cfg *jval) (peek, bool) {
	var p peek
	switch cfg.kind {
	case jobj:
		if cfg.dups["model_type"] || cfg.dups["block_size"] {
			return p, false
		}
		var ok bool
		if p.modelType, p.hasModelType, ok = strField(cfg, "model_type", true); !ok {
			return p, false
		}
		if p.blockSize, p.hasBlockSize, ok = usizeField(cfg, "block_size", true); !ok {
			return p, false
		}
		return p, true
	case jarr:
		if len(cfg.arr) > 2 {
			return p, false
		}
		m := &jval{kind: jobj, obj: map[string]*jval{}}
		for i, name := range []string{"model_type", "block_size"} {
			if i < len(cfg.arr) {
				m.obj[name] = cfg.arr[i]
			}
		}
		return peekStruct(m)
	}
	return p, false
}

// dsparkWidth is upstream's peek_dspark_configured_block_size: the config
// must deserialize as a DFlashConfig (nested dflash_config's
// mask_token_id, target_layer_ids and num_target_layers lifted to the top
// first) and be a DSpark drafter (markov_rank > 0). Its block_size counts
// proposals, so the verify width is block_size + 1, narrowed to
// runtime_block_size (default 8) and capped at 32.
func dsparkWidth(cfg *jval) (uint64, bool) {
	flat, ok := lift(cfg, "mask_token_id", "target_layer_ids", "num_target_layers")
	if !ok {
		return 0, false
	}
	for _, k := range []string{"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
		"num_key_value_heads", "head_dim", "vocab_size", "max_position_embeddings", "block_size", "num_target_layers", "markov_rank"} {
		if _, _, ok := usizeField(flat, k, false); !ok {
			return 0, false
		}
	}
	for _, k := range []string{"rms_norm_eps", "rope_theta"} {
		if !numField(flat, k) {
			return 0, false
		}
	}
	for _, k := range []string{"attention_bias", "tie_word_embeddings"} {
		if !boolField(flat, k) {
			return 0, false
		}
	}
	if _, _, ok := i32Field(flat, "mask_token_id"); !ok {
		return 0, false
	}
	if v := flat.obj["target_layer_ids"]; v != nil {
		if _, ok := usizeList(v); !ok {
			return 0, false
		}
	}
	runtime, hasRuntime, ok := usizeField(flat, "runtime_block_size", true)
	if !ok {
		return 0, false
	}
	rank, _, _ := usizeField(flat, "markov_rank", false)
	if rank == 0 {
		return 0, false // a plain DFlash drafter declares nothing
	}
	block, hasBlock, _ := usizeField(flat, "block_size", false)
	if !hasBlock {
		block = 16
	}
	verify := satAdd(block, 1)
	if !hasRuntime {
		runtime = dsparkDefaultVerifyWidth
	}
	return min(verify, runtime, dsparkMaxVerifyWidth), true
}

// museWidth is upstream's peek_muse_assistant_configured_block_size: a
// config marked as a Muse Glimmer assistant (model_type or architectures)
// that parses and validates as MuseAssistantConfig declares
// min(block_size (default 16), runtime_block_size).
func museWidth(cfg *jval) (uint64, bool) {
	if !isMuse(cfg) {
		return 0, false
	}
	flat, ok := lift(cfg, "mask_token_id", "target_layer_ids", "block_size", "runtime_block_size", "draft_window_size", "num_target_layers")
	if !ok {
		return 0, false
	}
	m, ok := decodeMuse(flat)
	if !ok || !m.valid() {
		return 0, false
	}
	if m.hasRuntime {
		return min(m.runtime, m.block), true
	}
	return m.block, true
}

// museConfig is what MuseAssistantConfig::validate reads of a config,
// after serde's type checks and defaults.
type museConfig struct {
	modelType        string
	sizes            map[string]uint64 // the required usize fields, by key
	layerTypes       []string
	sliding          uint64 // sliding_window, default 2048
	block            uint64 // block_size, default museDefaultBlockSize
	mask             int64  // mask_token_id (an i32)
	targets          []uint64
	numTarget, vocab uint64
	hasNumTarget     bool
	hasVocab         bool
	runtime          uint64
	hasRuntime       bool
}

// museSizes are MuseAssistantConfig's required usize fields.
var museSizes = []string{"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim"}

// decodeMuse deserializes flat as MuseAssistantConfig the way serde's
// derive does: a present field of the wrong type, or a missing required
// one, fails the whole config. Fields that validate does not read are
// type-checked only.
func decodeMuse(flat *jval) (museConfig, bool) {
	var m museConfig
	var ok, hasMT, hasSliding, hasBlock, hasMask bool
	if m.modelType, hasMT, ok = strField(flat, "model_type", false); !ok {
		return m, false
	}
	if !hasMT {
		m.modelType = "muse_glimmer_assistant"
	}
	m.sizes = map[string]uint64{}
	for _, k := range museSizes {
		n, present, ok := usizeField(flat, k, false)
		if !ok || !present {
			return m, false
		}
		m.sizes[k] = n
	}
	if !numField(flat, "rms_norm_eps") {
		return m, false
	}
	if m.layerTypes, ok = strList(flat.obj["layer_types"]); !ok {
		return m, false
	}
	if m.sliding, hasSliding, ok = usizeField(flat, "sliding_window", false); !ok {
		return m, false
	}
	if !hasSliding {
		m.sliding = 2048
	}
	if !ropeParametersOK(flat.obj["rope_parameters"]) {
		return m, false
	}
	if m.block, hasBlock, ok = usizeField(flat, "block_size", false); !ok {
		return m, false
	}
	if !hasBlock {
		m.block = museDefaultBlockSize
	}
	if m.mask, hasMask, ok = i32Field(flat, "mask_token_id"); !ok || !hasMask {
		return m, false
	}
	tv := flat.obj["target_layer_ids"]
	if tv == nil {
		return m, false
	}
	if m.targets, ok = usizeList(tv); !ok {
		return m, false
	}
	return m, m.decodeOptional(flat)
}

// decodeOptional type-checks MuseAssistantConfig's nullable fields.
func (m *museConfig) decodeOptional(flat *jval) bool {
	var ok bool
	if m.numTarget, m.hasNumTarget, ok = usizeField(flat, "num_target_layers", true); !ok {
		return false
	}
	if m.vocab, m.hasVocab, ok = usizeField(flat, "vocab_size", true); !ok {
		return false
	}
	if m.runtime, m.hasRuntime, ok = usizeField(flat, "runtime_block_size", true); !ok {
		return false
	}
	if _, _, ok := usizeField(flat, "draft_window_size", true); !ok {
		return false
	}
	return quantizationOK(flat.obj["quantization"])
}

// strList deserializes Option<Vec<String>>: absent, or an array of
// strings (nil, true when absent).
func strList(v *jval) ([]string, bool) {
	if v == nil {
		return nil, true
	}
	return listOf(v, (*jval).asStr)
}

// valid is MuseAssistantConfig::validate.
func (m *museConfig) valid() bool {
	layers := m.sizes["num_hidden_layers"]
	switch {
	case m.modelType != "muse_glimmer_assistant",
		layers == 0,
		m.sizes["hidden_size"] == 0 || m.sizes["head_dim"] == 0 || m.sizes["intermediate_size"] == 0,
		m.sizes["num_attention_heads"] == 0 || m.sizes["num_key_value_heads"] == 0,
		m.sizes["num_attention_heads"]%m.sizes["num_key_value_heads"] != 0,
		m.sliding == 0,
		uint64(len(m.targets)) != layers,
		m.block < 2,
		m.hasRuntime && m.runtime < 2,
		m.mask < 0,
		m.hasVocab && uint64(m.mask) >= m.vocab:
		return false
	}
	if len(m.layerTypes) > 0 {
		if uint64(len(m.layerTypes)) != layers {
			return false
		}
		for _, lt := range m.layerTypes {
			if lt != "sliding_attention" {
				return false
			}
		}
	}
	for i := 1; i < len(m.targets); i++ {
		if m.targets[i-1] >= m.targets[i] {
			return false
		}
	}
	return !(m.hasNumTarget && len(m.targets) > 0 && m.targets[len(m.targets)-1] >= m.numTarget)
}

// isMuse is upstream's is_muse_assistant_config.
func isMuse(cfg *jval) bool {
	if s, ok := cfg.get("model_type").asStr(); ok && s == "muse_glimmer_assistant" {
		return true
	}
	if a := cfg.get("architectures"); a != nil && a.kind == jarr {
		for _, e := range a.arr {
			if s, ok := e.asStr(); ok && s == "MuseGlimmerAssistantModel" {
				return true
			}
		}
	}
	return false
}

// lift copies cfg (an object) with dflash_config removed and, when it was
// an object, the named keys it holds copied to the top level, as upstream's
// from_json constructors do before deserializing.
func lift(cfg *jval, keys ...string) (*jval, bool) {
	if cfg.kind != jobj {
		return nil, false
	}
	flat := &jval{kind: jobj, obj: make(map[string]*jval, len(cfg.obj))}
	for k, v := range cfg.obj {
		if k != "dflash_config" {
			flat.obj[k] = v
		}
	}
	if nested := cfg.obj["dflash_config"]; nested != nil && nested.kind == jobj {
		for _, k := range keys {
			if v := nested.obj[k]; v != nil {
				flat.obj[k] = v
			}
		}
	}
	return flat, true
}

// Muse's config goes through a serde_json::Value first, so a repeated key
// there is last-wins, not an error.

// ropeParametersOK checks Option<MuseAssistantRopeParameters>: null or
// absent, or a struct whose only field rope_theta is a number when given
// (serde also accepts the struct as a one-element array).
func ropeParametersOK(v *jval) bool {
	switch {
	case v == nil || v.kind == jnull:
		return true
	case v.kind == jobj:
		return numField(v, "rope_theta")
	case v.kind == jarr:
		return len(v.arr) == 0 || (len(v.arr) == 1 && v.arr[0].kind == jnum)
	}
	return false
}

// quantizationOK checks Option<MuseAssistantQuantization { group_size: i32,
// bits: i32 }>. Upstream also runs validate_quantization_params, whose
// rules are not in the reference; only the types are checked here.
func quantizationOK(v *jval) bool {
	switch {
	case v == nil || v.kind == jnull:
		return true
	case v.kind == jobj:
		_, g, okg := i32Field(v, "group_size")
		_, b, okb := i32Field(v, "bits")
		return g && b && okg && okb
	case v.kind == jarr:
		if len(v.arr) != 2 {
			return false
		}
		m := &jval{kind: jobj, obj: map[string]*jval{"group_size": v.arr[0], "bits": v.arr[1]}}
		return quantizationOK(m)
	}
	return false
}

func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

// show is v for a line an operator reads: a number as written, a string
// quoted, both cut; a list or table by its brackets.
func (v *jval) show() string {
	switch v.kind {
	case jnull:
		return "null"
	case jbool:
		return strconv.FormatBool(v.b)
	case jnum:
		return quote.Text(v.lex, 40)
	case jstr:
		return quote.Quoted(v.s, 40)
	case jarr:
		return "[…]"
	}
	return "{…}"
}
