package adapt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/speclaunch/speclaunch/internal/safefile"
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

// id is the key's file name stem: a hash of its canonical JSON.
func (k CacheKey) id() string {
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

// maxCacheBytes bounds a cache file: a curve is a few hundred bytes.
const maxCacheBytes = 1 << 20

type cacheFile struct {
	Key    CacheKey  `json:"key"`
	Curve  Curve     `json:"curve"`
	Probed time.Time `json:"probed"`
}

func cachePath(dir string, k CacheKey) string {
	return filepath.Join(dir, "verify-curve-"+k.id()+".json")
}

// LoadCurve returns the cached curve for k. A missing file is a miss; a
// file that is not a regular file, too large, corrupt, or for another key is
// a miss with a warning, never an error: the probe can always run again.
func LoadCurve(dir string, k CacheKey, log *slog.Logger) (Curve, bool) {
	var cf cacheFile
	warn, ok := readCacheJSON(cachePath(dir, k), &cf, log, "adapt: ignoring the cached verify-cost curve; probing again")
	if !ok {
		return Curve{}, false
	}
	if !sameKey(cf.Key, k) {
		warn("written for another engine, GPU or model")
		return Curve{}, false
	}
	if len(cf.Curve.VerifyMS) == 0 {
		warn("no verify costs in it")
		return Curve{}, false
	}
	for rows, ms := range cf.Curve.VerifyMS {
		if rows < 1 || !(ms > 0 && ms < 1e6) {
			warn(fmt.Sprintf("bad entry %d rows = %v ms", rows, ms))
			return Curve{}, false
		}
	}
	cf.Curve.Source = "cache"
	return cf.Curve, true
}

func sameKey(a, b CacheKey) bool {
	return a.Engine == b.Engine && a.GPU == b.GPU && a.Capability == b.Capability && a.Slots == b.Slots && slices.Equal(a.Models, b.Models)
}

// SaveCurve writes the curve for k atomically (a temporary file renamed
// over the old one), creating dir.
func SaveCurve(dir string, k CacheKey, c Curve, now time.Time) error {
	b, err := json.MarshalIndent(cacheFile{Key: k, Curve: c, Probed: now.UTC()}, "", "  ")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return writeCacheFile(dir, cachePath(dir, k), b)
}

// readCacheJSON decodes the cache file at path into v. A file that is
// there but cannot be read or decoded is logged with msg, the file and
// why; warn logs any later objection the same way.
func readCacheJSON(path string, v any, log *slog.Logger, msg string) (warn func(why string), ok bool) {
	warn = func(why string) {
		if log != nil {
			log.Warn(msg, "file", path, "why", why)
		}
	}
	b, ok := readCacheFile(path, warn)
	if !ok {
		return warn, false
	}
	if err := json.Unmarshal(b, v); err != nil {
		warn("corrupt: " + err.Error())
		return warn, false
	}
	return warn, true
}

// readCacheFile reads a cache file of at most maxCacheBytes. A missing
// file is a quiet miss; anything else that stops it (a link, not a regular
// file, too large, unreadable) is a miss that warn is told of. The read
// goes through safefile: a FIFO put in place after the Lstat must not
// block the loop's start (the open is non-blocking, and what was opened is
// checked again), and a link put in place is refused (SameFile).
func readCacheFile(path string, warn func(why string)) ([]byte, bool) {
	fi, err := os.Lstat(path)
	if err != nil {
		if !os.IsNotExist(err) {
			warn(err.Error())
		}
		return nil, false
	}
	if !fi.Mode().IsRegular() {
		warn("not a regular file")
		return nil, false
	}
	if fi.Size() > maxCacheBytes {
		warn(fmt.Sprintf("%d bytes, more than %d", fi.Size(), maxCacheBytes))
		return nil, false
	}
	r, err := safefile.Open(context.Background(), "cache file", path, maxCacheBytes)
	if err != nil {
		cacheReadFailed(err, warn)
		return nil, false
	}
	defer r.Close()
	if !r.SameFile(fi) {
		warn("replaced while it was opened")
		return nil, false
	}
	b, err := io.ReadAll(r)
	if err != nil {
		cacheReadFailed(err, warn)
		return nil, false
	}
	return b, true
}

// cacheReadFailed tells warn why a cache file could not be read: a
// refusal's reason, or the error.
func cacheReadFailed(err error, warn func(why string)) {
	if se := (*safefile.Error)(nil); errors.As(err, &se) {
		warn(se.Msg)
		return
	}
	warn(err.Error())
}

// writeCacheFile writes b to path in dir atomically (a temporary file
// renamed over the old one), creating dir.
func writeCacheFile(dir, path string, b []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".speclaunch-*.tmp")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("cache: %w", err)
	}
	if err := tmp.Sync(); err != nil { // a crash leaves the old file or the new, not a torn one
		tmp.Close()
		return fmt.Errorf("cache: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}
