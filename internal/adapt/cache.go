package adapt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// ModelFile identifies a model file by path, size, modification time and
// content: re-quantizing, replacing or copying another file over it
// changes one of them.
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

// ID is the key's file name stem: a hash of its canonical JSON.
func (k CacheKey) ID() string {
	b, _ := json.Marshal(k)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
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
