package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// DetectTimeout bounds each of `llama-server --help` and `--version`.
const DetectTimeout = 10 * time.Second

// ParseLlamaHelp reads the flag spelling from `llama-server --help`:
// 2026 when it lists --spec-draft-n-max and the draft-simple spec type;
// legacy when it lists --draft-max (2026 trees still list --draft-max as a
// removed stub, so the 2026 test comes first); unknown otherwise.
func ParseLlamaHelp(help string) Spelling {
	if strings.Contains(help, "--spec-draft-n-max") && strings.Contains(help, "draft-simple") {
		return Spelling2026
	}
	if strings.Contains(help, "--draft-max") {
		return SpellingLegacy
	}
	return SpellingUnknown
}

var (
	versionRE = regexp.MustCompile(`(?m)^version:\s*(\S+)(?:[ \t]+\(([^)\n]*)\))?`)
	commitRE  = regexp.MustCompile(`^[0-9a-fA-F]{4,40}$`)
)

// ParseLlamaVersion reads `version: 9749 (d32676d)` from `llama-server
// --version` output and returns ("9749 (d32676d)", "d32676d"). A build
// without git, as from a source archive, prints `version: 0 (unknown)`: its
// version is kept as printed and its commit is "".
func ParseLlamaVersion(out string) (version, commit string) {
	m := versionRE.FindStringSubmatch(out)
	if m == nil {
		return "", ""
	}
	if m[2] == "" {
		return m[1], ""
	}
	version = m[1] + " (" + m[2] + ")"
	if commitRE.MatchString(m[2]) {
		commit = m[2]
	}
	return version, commit
}

type capsCacheEntry struct {
	Path     string    `json:"path"`
	ModTime  time.Time `json:"mtime"`
	Size     int64     `json:"size"`
	Spelling Spelling  `json:"spelling"`
	Version  string    `json:"version"`
	Commit   string    `json:"commit"`
}

var (
	capsMu  sync.Mutex
	capsMem = map[string]capsCacheEntry{}
)

// capsCacheFile is $XDG_CACHE_HOME/speclaunch/llama-caps.json (or the OS
// user cache directory).
func capsCacheFile() string {
	dir := os.Getenv("XDG_CACHE_HOME")
	if dir == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		dir = d
	}
	return filepath.Join(dir, "speclaunch", "llama-caps.json")
}

func loadCapsFile(file string) map[string]capsCacheEntry {
	out := map[string]capsCacheEntry{}
	if file == "" {
		return out
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return out
	}
	_ = json.Unmarshal(b, &out) // best effort: a bad cache is a cold cache
	return out
}

func saveCapsFile(file string, e capsCacheEntry) {
	if file == "" {
		return
	}
	m := loadCapsFile(file)
	m[e.Path] = e
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".llama-caps-*.json")
	if err != nil {
		return
	}
	_, werr := tmp.Write(append(b, '\n'))
	cerr := tmp.Close()
	if werr != nil || cerr != nil {
		os.Remove(tmp.Name())
		return
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		os.Remove(tmp.Name())
	}
}

// DetectLlama runs `binary --help` and `binary --version` (each bounded by
// DetectTimeout, with LLAMA_ARG_* kept out of their environment) and returns the flag spelling and version. Results are
// cached per (path, mtime, size) in memory and, best effort, in
// $XDG_CACHE_HOME/speclaunch/llama-caps.json. A binary whose help matches
// neither spelling gives Spelling "" and no error.
func DetectLlama(ctx context.Context, binary string) (Caps, error) {
	path, err := exec.LookPath(binary)
	if err != nil {
		return Caps{}, fmt.Errorf("llama-server binary %q not found: install llama.cpp's llama-server or set engine.binary to its path: %w", binary, err)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Caps{}, fmt.Errorf("llama-server binary %q: %w", path, err)
	}
	capsMu.Lock()
	defer capsMu.Unlock()
	fresh := func(e capsCacheEntry) bool {
		return e.Path == path && e.ModTime.Equal(fi.ModTime()) && e.Size == fi.Size()
	}
	if e, ok := capsMem[path]; ok && fresh(e) {
		return Caps{Spelling: e.Spelling, Version: e.Version, Commit: e.Commit}, nil
	}
	file := capsCacheFile()
	if e, ok := loadCapsFile(file)[path]; ok && fresh(e) {
		capsMem[path] = e
		return Caps{Spelling: e.Spelling, Version: e.Version, Commit: e.Commit}, nil
	}
	help, err := runBounded(ctx, path, "--help")
	if err != nil {
		return Caps{}, fmt.Errorf("running %s --help: %w: check that it is a llama.cpp llama-server binary", path, err)
	}
	e := capsCacheEntry{Path: path, ModTime: fi.ModTime(), Size: fi.Size(), Spelling: ParseLlamaHelp(help)}
	if out, err := runBounded(ctx, path, "--version"); err == nil {
		e.Version, e.Commit = ParseLlamaVersion(out)
	}
	capsMem[path] = e
	saveCapsFile(file, e)
	return Caps{Spelling: e.Spelling, Version: e.Version, Commit: e.Commit}, nil
}

// runBounded runs path arg with DetectTimeout and returns stdout+stderr.
func runBounded(ctx context.Context, path, arg string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, DetectTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, arg)
	// A 2026 llama-server parses LLAMA_ARG_* before --help and stops on a
	// removed one (LLAMA_ARG_DRAFT_MAX): inspect it with a clean slate.
	cmd.Env = []string{}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "LLAMA_ARG_") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	return runCaptured(ctx, cmd, DetectTimeout)
}

// runCaptured runs cmd (made with ctx) and returns its stdout+stderr; an
// error carries the first 300 bytes of that output, and a deadline says
// how long it waited.
func runCaptured(ctx context.Context, cmd *exec.Cmd, timeout time.Duration) (string, error) {
	ownGroup(cmd)
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	endGroup(cmd)
	if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return "", fmt.Errorf("timed out after %s", timeout)
	}
	if err != nil {
		msg := strings.TrimSpace(out.String())
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		if msg != "" {
			return "", fmt.Errorf("%w (%s)", err, msg)
		}
		return "", err
	}
	return out.String(), nil
}
