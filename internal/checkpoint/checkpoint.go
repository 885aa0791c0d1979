// Package checkpoint reads the facts the width policy keys on from model
// files on disk, without loading weights: the target's quantization (MLX
// config.json or GGUF header), the drafter's kind, and a width the drafter
// checkpoint declares for itself.
//
// Upstream mlxcel is the reference for the MLX rules: a measured entry
// keyed on "affine" or a declared width must mean what it means to mlxcel,
// so the classification and the peeks reproduce upstream's, including what
// upstream refuses to parse. Nothing here returns an error for a missing
// or unreadable file; the answer is "unknown" and a note says why, because
// the launcher then falls back to a default rather than stopping.
package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/quote"
)

// TargetQuant classifies the target at path: an MLX directory (its
// config.json), a config.json itself, a .gguf file (GGUF header), or a
// directory without config.json holding one GGUF model (a single file, or
// the first shard of a split). The note says how the answer was found or
// why it is unknown. It never fails: unreadable is key.QuantUnknown.
// Reads stop when ctx ends (Ctrl-C during a large GGUF header).
func TargetQuant(ctx context.Context, path string) (key.Quant, string) {
	fi, err := os.Stat(path)
	if err != nil {
		return key.QuantUnknown, fmt.Sprintf("cannot read target: %v", err)
	}
	if !fi.IsDir() {
		if filepath.Base(path) == "config.json" {
			return configQuant(ctx, filepath.Dir(path))
		}
		return ggufQuant(ctx, path)
	}
	if _, err := os.Stat(filepath.Join(path, "config.json")); err == nil || !os.IsNotExist(err) {
		return configQuant(ctx, path)
	}
	g, why := findGGUF(path)
	if g == "" {
		return key.QuantUnknown, why
	}
	return ggufQuant(ctx, g)
}

func configQuant(ctx context.Context, dir string) (key.Quant, string) {
	raw, err := readConfig(ctx, dir)
	if err != nil {
		return key.QuantUnknown, fmt.Sprintf("cannot read config.json: %v", err)
	}
	v, err := parseJSON(raw)
	if err != nil {
		// Named as mlxcel's reader would fail it: a 100,000-deep file is
		// JSON, past serde_json's recursion limit (a final user pass
		// read "not valid JSON" of it).
		return key.QuantUnknown, fmt.Sprintf("config.json is not valid JSON to mlxcel's reader (%v)", err)
	}
	return classify(v), "from config.json (mlxcel's classify_quantization rules)"
}

func ggufQuant(ctx context.Context, file string) (key.Quant, string) {
	info, err := ReadGGUFFile(ctx, file)
	if err != nil {
		return key.QuantUnknown, fmt.Sprintf("cannot read GGUF header: %v", err)
	}
	note := fmt.Sprintf("GGUF %s: dominant weight type %s", filepath.Base(file), info.Dominant)
	if info.FileType >= 0 {
		note += fmt.Sprintf(", general.file_type %d", info.FileType)
	}
	return info.Dominant, note
}

// findGGUF picks the GGUF model in dir: the only .gguf, or the first shard
// of one split model (name-00001-of-000NN.gguf); mmproj and other files
// beside a split are ignored only when they are not GGUF.
func findGGUF(dir string) (string, string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Sprintf("cannot list target directory: %v", err)
	}
	var ggufs []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(strings.ToLower(e.Name()), ".gguf") {
			ggufs = append(ggufs, e.Name())
		}
	}
	sort.Strings(ggufs)
	switch {
	case len(ggufs) == 0:
		return "", "no config.json and no .gguf file in the target directory"
	case len(ggufs) == 1:
		return filepath.Join(dir, ggufs[0]), ""
	}
	var first []string
	for _, n := range ggufs {
		if strings.Contains(n, "-00001-of-") {
			first = append(first, n)
		}
	}
	if len(first) == 1 && len(first) < len(ggufs) && allShards(ggufs, first[0]) {
		return filepath.Join(dir, first[0]), ""
	}
	return "", fmt.Sprintf("%d .gguf files in the target directory (%s): name the file to serve", len(ggufs), strings.Join(ggufs, ", "))
}

func allShards(names []string, first string) bool {
	stem := first[:strings.Index(first, "-00001-of-")]
	for _, n := range names {
		if !strings.HasPrefix(n, stem+"-") || !strings.Contains(n, "-of-") {
			return false
		}
	}
	return true
}

// Drafter model_type values upstream maps to a kind
// (mlxcel_core::drafter::drafter_kind_by_model_type).
var kindByModelType = map[string]key.Drafter{
	"gemma4_assistant":         key.MTP,
	"gemma4_unified_assistant": key.MTP,
	"qwen3_5_mtp":              key.MTP,
	"glm4_moe_lite_mtp":        key.MTP,
	"muse_glimmer_assistant":   key.DFlash,
}

// Architectures that mark a DFlash-family drafter whose config declares no
// model_type of its own (upstream falls back to dflash for them anyway).
var dflashArchitectures = []string{"DFlashDraftModel", "Lfm2DSparkDraftModel", "MuseGlimmerAssistantModel"}

// DrafterKind infers a drafter's kind from its checkpoint. For an MLX
// directory: model_type through upstream's map (read with upstream's
// strict peek, so a config upstream cannot parse infers nothing), then
// markov_rank > 0 (an LFM2 DSpark drafter, which mlxcel runs as kind
// dflash with its own width) or a DFlash-family architectures entry.
// For a GGUF file: general.architecture dflash, eagle3 or an MTP head;
// any other GGUF is a plain draft model (llama.cpp draft-simple).
// ok is false when nothing identifies the kind: the caller then uses the
// profile's or the engine's default.
// Reads stop when ctx ends.
func DrafterKind(ctx context.Context, path string) (key.Drafter, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", false
	}
	if !fi.IsDir() {
		return ggufDrafter(ctx, path)
	}
	raw, err := readConfig(ctx, path)
	if err != nil {
		if g, _ := findGGUF(path); g != "" && errors.Is(err, fs.ErrNotExist) {
			return ggufDrafter(ctx, g)
		}
		return "", false
	}
	return drafterFromConfig(raw)
}

// KindFrom says where DrafterKind read kind det at path, for a message
// that compares it: "the drafter's config.json (dflash)" for a checkpoint
// directory, and for a GGUF file (or a directory holding only one) its
// metadata, which has no config.json: "the drafter's GGUF metadata
// (general.architecture in d.gguf gives kind draft)". A path that cannot
// be looked at is a GGUF file by its extension.
func KindFrom(path string, det key.Drafter) string {
	file := strings.HasSuffix(strings.ToLower(path), ".gguf")
	if fi, err := os.Stat(path); err == nil {
		file = !fi.IsDir()
		if fi.IsDir() {
			if _, err := os.Stat(filepath.Join(path, "config.json")); errors.Is(err, fs.ErrNotExist) {
				if g, _ := findGGUF(path); g != "" {
					path, file = g, true
				}
			}
		}
	}
	if file {
		return fmt.Sprintf("the drafter's GGUF metadata (general.architecture in %s gives kind %s)", quote.Text(path, 0), det)
	}
	return fmt.Sprintf("the drafter's config.json (%s)", det)
}

func drafterFromConfig(raw []byte) (key.Drafter, bool) {
	cfg, err := parseJSON(raw)
	if err != nil {
		return "", false
	}
	if p, ok := peekStruct(cfg); ok && p.hasModelType {
		if k, ok := kindByModelType[p.modelType]; ok {
			return k, true
		}
	}
	if n, ok := cfg.get("markov_rank").asU64(); ok && n > 0 {
		return key.DFlash, true
	}
	if arch := cfg.get("architectures"); arch != nil && arch.kind == jarr {
		for _, a := range arch.arr {
			s, _ := a.asStr()
			for _, d := range dflashArchitectures {
				if s == d {
					return key.DFlash, true
				}
			}
		}
	}
	return "", false
}

func ggufDrafter(ctx context.Context, file string) (key.Drafter, bool) {
	info, err := ReadGGUFFile(ctx, file)
	if err != nil {
		return "", false
	}
	a := strings.ToLower(info.Architecture)
	switch {
	case a == "dflash":
		return key.DFlash, true
	case a == "eagle3":
		return key.Eagle3, true
	case strings.Contains(a, "mtp") || strings.HasSuffix(a, "-assistant"):
		return key.MTP, true
	}
	return key.Draft, true
}
