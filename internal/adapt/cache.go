package adapt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CacheKey names what a probed curve is a property of: the engine build,
// the GPU, the model files and the engine's slots. A different key is a
// different curve.
type CacheKey struct {
	Engine     string      `json:"engine"`     // e.g. "llama.cpp 0 (d32676d)"
	GPU        string      `json:"gpu"`        // e.g. "NVIDIA H200"
	Capability string      `json:"capability"` // e.g. "9.0"
	Models     []ModelFile `json:"models"`
	// Slots is the engine's /props total_slots (0: unknown). The same
	// rows cost differently with another slot count (the KV cache is
	// split among the slots): on the H200 of 2026-12-03 a curve probed
	// under -np 4 was reused for an -np 1 engine of the same files.
	Slots int `json:"slots"`
}

// ModelFile identifies a model file by its size and content: re-quantizing
// it or copying another file over it changes them; moving, copying or
// touching it does not (the same weights mounted at another path in a
// container are the same pair). Path and ModTime are kept in the state
// file to say what changed.
type ModelFile struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	ModTime int64  `json:"mtime_unix_ns"`
	// SHA256 is the content hash of the record's content_method (sampled
	// above 64 MiB, so it costs about 33 MiB of reading per file).
	SHA256 string `json:"sha256,omitempty"`
}

// StatModel fills a ModelFile from the file system.
func StatModel(path string) (ModelFile, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ModelFile{}, err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return ModelFile{}, fmt.Errorf("model file: %w", err)
	}
	return ModelFile{Path: abs, Size: fi.Size(), ModTime: fi.ModTime().UnixNano()}, nil
}

// ID is the key's file name stem: a hash of what the curve is a property
// of (the engine, the GPU, the slots, each model's size and content), not
// of where the models lie or when they were written. A model whose content
// is unknown is named by its path and time instead.
func (k CacheKey) ID() string {
	id := k
	id.Models = make([]ModelFile, len(k.Models))
	for i, m := range k.Models {
		id.Models[i] = ModelFile{Size: m.Size, SHA256: m.SHA256}
		if m.SHA256 == "" {
			id.Models[i] = m
		}
	}
	b, _ := json.Marshal(id)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// Changed says what differs from old to k, for a state saved for the same
// model paths that k does not resume: the engine, the GPU, the slots, a
// model's content. Empty when the keys are the same curve's.
func (k CacheKey) Changed(old CacheKey) []string {
	var out []string
	if old.Engine != k.Engine {
		out = append(out, fmt.Sprintf("the engine (%s, now %s)", old.Engine, k.Engine))
	}
	if old.GPU != k.GPU || old.Capability != k.Capability {
		gpu := func(k CacheKey) string { return strings.TrimSpace(k.GPU + " " + k.Capability) }
		out = append(out, fmt.Sprintf("the GPU (%s, now %s)", gpu(old), gpu(k)))
	}
	switch {
	case old.Slots == 0 && k.Slots > 0:
		// Saved before the key held the engine's slots: the count it was
		// learnt under is not known (a review: "(0, now 4)" read as a
		// state learnt under no slots, after every upgrade).
		out = append(out, fmt.Sprintf("the engine's slots (not recorded when it was saved, now %d)", k.Slots))
	case old.Slots != k.Slots:
		out = append(out, fmt.Sprintf("the engine's slots (%d, now %d)", old.Slots, k.Slots))
	}
	for i, m := range k.Models {
		if i < len(old.Models) && (old.Models[i].SHA256 != m.SHA256 || old.Models[i].Size != m.Size) {
			out = append(out, "the content of "+m.Path)
		}
	}
	if len(old.Models) != len(k.Models) {
		out = append(out, fmt.Sprintf("the model files (%d, now %d)", len(old.Models), len(k.Models)))
	}
	return out
}

// SamePaths says old was saved for the model files k names, at the same
// paths: a state that is not resumed is worth a word only then.
func (k CacheKey) SamePaths(old CacheKey) bool {
	if len(old.Models) != len(k.Models) || len(k.Models) == 0 {
		return false
	}
	for i, m := range k.Models {
		if old.Models[i].Path != m.Path {
			return false
		}
	}
	return true
}

// CacheDir is $XDG_CACHE_HOME/speclaunch, or ~/.cache/speclaunch.
func CacheDir() (string, error) {
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "speclaunch"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory: $XDG_CACHE_HOME is unset and %w", err)
	}
	return filepath.Join(home, ".cache", "speclaunch"), nil
}
