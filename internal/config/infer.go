package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/llamaflags"
	"github.com/speclaunch/speclaunch/internal/quote"
)

// TargetKind is what a target model path is on disk, as far as the engine
// choice cares.
type TargetKind int

const (
	TargetUnknown TargetKind = iota // absent, unreadable, a repo id
	TargetGGUF                      // a GGUF file (or a directory of them without config.json)
	TargetMLX                       // an MLX checkpoint directory (config.json)
)

// EngineHints are what points at an engine when the operator names none.
// Each string is what to quote in the reason; "" = not seen.
type EngineHints struct {
	Target     string     // the target model as given
	TargetKind TargetKind // what Target is on disk
	Binary     string     // the engine binary the operator set
	LlamaFlag  string     // a llama-server-only engine argument ("-ngl")
	SpecType   string     // a draft kind in llama-server's --spec-type spelling ("draft-simple")
	LlamaEnv   string     // a LLAMA_ARG_* variable that mlxcel does not read as its own
	OnPath     []string   // which of mlxcel-server and llama-server PATH has
}

// InferEngine picks the engine when no flag, variable or profile names one.
// The target's format decides first (mlxcel reads no GGUF, llama-server no
// MLX directory); then what the operator typed in llama-server's own terms;
// then what PATH holds; mlxcel otherwise. The reason says which.
func InferEngine(h EngineHints) (key.Engine, string) {
	switch h.TargetKind {
	case TargetGGUF:
		return key.LlamaCpp, "the target is a GGUF file (" + quote.Text(h.Target, 80) + "), which llama-server runs"
	case TargetMLX:
		return key.MLXCEL, "the target is an MLX checkpoint directory"
	}
	switch base := filepath.Base(h.Binary); {
	case h.Binary == "":
	case strings.HasPrefix(base, "llama-server"):
		return key.LlamaCpp, "the engine binary is " + quote.Text(base, 80)
	case strings.HasPrefix(base, "mlxcel"):
		return key.MLXCEL, "the engine binary is " + quote.Text(base, 80)
	}
	switch {
	case h.LlamaFlag != "":
		return key.LlamaCpp, h.LlamaFlag + " is a llama-server flag"
	case h.SpecType != "":
		return key.LlamaCpp, "--spec-type " + quote.Text(h.SpecType, 40) + " is llama-server's spelling"
	case h.LlamaEnv != "":
		return key.LlamaCpp, h.LlamaEnv + " is set (a llama-server variable)"
	}
	mlx, llama := slices.Contains(h.OnPath, "mlxcel-server"), slices.Contains(h.OnPath, "llama-server")
	if llama && !mlx {
		return key.LlamaCpp, "llama-server is on PATH and mlxcel-server is not"
	}
	return key.MLXCEL, ""
}

// sharedLlamaEnvs are the LLAMA_ARG_* variables mlxcel-server reads as its
// own (reference/mlxcel.md §4): setting one says nothing about the engine.
var sharedLlamaEnvs = []string{
	"LLAMA_ARG_MODEL", "LLAMA_ARG_HOST", "LLAMA_ARG_PORT",
	"LLAMA_ARG_DRAFT_KIND", "LLAMA_ARG_DRAFT_BLOCK_SIZE",
	"LLAMA_ARG_SPEC_DRAFT_MODEL", "LLAMA_ARG_MODEL_DRAFT",
}

// llamaOnlyFlags are the engine arguments that only make sense to
// llama-server: layers offloaded to the GPU are a GGUF notion.
var llamaOnlyFlags = slices.Concat(llamaflags.Spellings("-ngl"), llamaflags.Spellings("-ngld"))

// hints gathers EngineHints from the raw layers (no notices: the rows that
// own these values layer them later) and the disk.
func (l *layer) hints() EngineHints {
	var h EngineHints
	if v, src, ok := l.peek(modelRow); ok {
		if src.Origin == Profile {
			v = RelTo(l.prof.Path, v)
		}
		h.Target, h.TargetKind = v, targetKind(v)
	}
	if v, src, ok := l.peek(engineBinaryRow); ok {
		if src.Origin == Profile {
			v = RelTo(l.prof.Path, v)
		}
		h.Binary = v
	}
	if v, _, ok := l.peek(draftKindRow); ok && strings.HasPrefix(strings.ToLower(v), "draft-") {
		h.SpecType = v
	}
	args := l.in.Passthrough
	if p := l.prof; p != nil {
		args = slices.Concat(p.Engine.Args, args)
	}
	for _, a := range args {
		if name, _, _ := strings.Cut(a, "="); slices.Contains(llamaOnlyFlags, name) {
			h.LlamaFlag = name
			break
		}
	}
	h.LlamaEnv = l.llamaEnv()
	if l.in.LookPath != nil {
		for _, b := range []string{"mlxcel-server", "llama-server"} {
			if _, err := l.in.LookPath(b); err == nil {
				h.OnPath = append(h.OnPath, b)
			}
		}
	}
	return h
}

// rowEnvNames are every row's variables, knownEnvNames those and
// mlxcel-server's own, and knownLlamaEnvs the LLAMA_ARG_* ones among them
// and every one the captured llama-server trees read (set in init: Rows
// holds the rows that read it).
var rowEnvNames, knownEnvNames, knownLlamaEnvs []string

func init() {
	for _, r := range Rows {
		rowEnvNames = append(rowEnvNames, r.Envs...)
	}
	knownEnvNames = slices.Concat(rowEnvNames, mlxcelEnvs)
	for _, n := range slices.Concat(rowEnvNames, llamaflags.Variables()) {
		if strings.HasPrefix(n, llamaPrefix) && !slices.Contains(knownLlamaEnvs, n) {
			knownLlamaEnvs = append(knownLlamaEnvs, n)
		}
	}
}

// llamaPrefix begins llama-server's variables (and mlxcel's shared ones).
const llamaPrefix = "LLAMA_ARG_"

// mlxcelEnvs are the MLXCEL_* variables mlxcel-server reads itself (its
// docs, as ../shared/reference/mlxcel.md lists them; the rows hold the
// ones speclaunch reads), passed to the engine as they are.
var mlxcelEnvs = []string{"MLXCEL_AUTOTUNE", "MLXCEL_CACHE_CLEAR_INTERVAL", "MLXCEL_CACHE_DIR", "MLXCEL_CACHE_LIMIT",
	"MLXCEL_CUDA_F16_NORMALIZE", "MLXCEL_DECODE_TIMEOUT", "MLXCEL_DEFAULT_ORG", "MLXCEL_DEVICE", "MLXCEL_EMBEDDING_MODEL",
	"MLXCEL_ENABLE_MTP_B1", "MLXCEL_ENABLE_MTP_BATCH", "MLXCEL_ENABLE_SETTINGS_ENDPOINT", "MLXCEL_GDN_CHAIN_PARITY",
	"MLXCEL_KEEP_BF16", "MLXCEL_KV_CACHE_BUDGET", "MLXCEL_MODELS_DIR", "MLXCEL_MTP_ADAPTIVE", "MLXCEL_MTP_ALLOW_INEXACT",
	"MLXCEL_MTP_BLOCK_CONTROLLER", "MLXCEL_MTP_SLICE_GRANT_ROUNDS", "MLXCEL_MTP_TICK_SLICE", "MLXCEL_PREFILL_CHUNK",
	"MLXCEL_PROMPT_CACHE_ENABLED", "MLXCEL_SDPA_VECTOR_LARGE_D", "MLXCEL_SERVER_DECODE_STORAGE", "MLXCEL_SURGERY"}

// envTypos warns of each MLXCEL_* variable set that neither speclaunch nor
// mlxcel-server reads, and each LLAMA_ARG_* one that neither speclaunch
// nor a llama-server tree it knows reads, that is a typo of one (within 2
// edits: MLXCEL_PROT for MLXCEL_PORT, LLAMA_ARG_PROT for LLAMA_ARG_PORT):
// each was ignored in silence, where a misspelt flag is refused. A
// warning, not an error: a newer llama-server may read a variable the
// captured trees do not name. Only the name is said, never the value.
func envTypos(names []string) []Notice {
	var out []Notice
	for _, n := range names {
		near := EnvTypo(n)
		switch {
		case near == "":
		case strings.HasPrefix(n, llamaPrefix):
			out = append(out, Notice{"warn", fmt.Sprintf("%s is set, but neither speclaunch nor the llama-server versions it knows read it (a newer one may): did you mean %s?", n, near)})
		default:
			out = append(out, Notice{"warn", fmt.Sprintf("%s is set, but neither speclaunch nor mlxcel-server reads it: did you mean %s?", n, near)})
		}
	}
	return out
}

// EnvTypo is the variable that name is a typo of (within 2 edits): an
// MLXCEL_* variable neither speclaunch nor mlxcel-server reads, or a
// LLAMA_ARG_* one neither speclaunch nor a known llama-server reads; ""
// when it is none. Its value is never printed: a key or password typed
// under a misspelt name is as secret as under the right one.
func EnvTypo(name string) string {
	switch {
	case strings.HasPrefix(name, "MLXCEL_") && !slices.Contains(knownEnvNames, name):
		return llamaflags.Nearest(name, knownEnvNames)
	case strings.HasPrefix(name, llamaPrefix) && !slices.Contains(knownLlamaEnvs, name):
		return llamaflags.Nearest(name, knownLlamaEnvs)
	}
	return ""
}

// llamaEnv is the first LLAMA_ARG_* variable set (among the ones the rows
// read and Input.EnvNames) that mlxcel does not read as its own.
func (l *layer) llamaEnv() string {
	names := slices.Concat(rowEnvNames, l.in.EnvNames)
	slices.Sort(names)
	for _, n := range slices.Compact(names) {
		if strings.HasPrefix(n, "LLAMA_ARG_") && !slices.Contains(sharedLlamaEnvs, n) && l.in.Getenv(n) != "" {
			return n
		}
	}
	return ""
}

// targetKind looks at a target path: a .gguf name needs no look; a regular
// file other than config.json is a GGUF (as checkpoint.TargetQuant reads
// it); a directory is MLX when it holds config.json, GGUF when it holds
// .gguf files. Only names are read, never contents (a FIFO cannot block).
func targetKind(path string) TargetKind {
	if strings.HasSuffix(strings.ToLower(path), ".gguf") {
		return TargetGGUF
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return TargetUnknown
	case fi.Mode().IsRegular():
		if filepath.Base(path) == "config.json" {
			return TargetMLX
		}
		return TargetGGUF
	case !fi.IsDir():
		return TargetUnknown
	}
	if _, err := os.Stat(filepath.Join(path, "config.json")); err == nil {
		return TargetMLX
	}
	if m, _ := filepath.Glob(filepath.Join(globEscape(path), "*.gguf")); len(m) > 0 {
		return TargetGGUF
	}
	return TargetUnknown
}

// globEscape quotes the glob metacharacters of a directory name.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
