package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/speclaunch/speclaunch/internal/key"
)

// PyDetectTimeout bounds `vllm --version` and SGLang's version query: both
// start a Python interpreter, and `vllm --version` imports vLLM's CLI.
const PyDetectTimeout = 60 * time.Second

var pyVersionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)(?:\.(\d+))?\S*$`)

// ParsePyVersion reads a Python package version ("0.8.5.post1",
// "0.11.0rc2.dev8+g4b7f5ea1a") from the last line of out that is one (vLLM
// may log INFO lines before it). ok=false when there is none.
func ParsePyVersion(out string) (version string, major, minor int, ok bool) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		m := pyVersionRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		major, _ = strconv.Atoi(m[1])
		minor, _ = strconv.Atoi(m[2])
		return strings.TrimPrefix(l, "v"), major, minor, true
	}
	return "", 0, 0, false
}

// VLLMSpellingFor picks vLLM's speculative flag spelling from its version:
// --speculative-config from 0.8.0 on (PR #14434), the removed
// --speculative-model/--num-speculative-tokens before.
func VLLMSpellingFor(version string) Spelling {
	_, major, minor, ok := ParsePyVersion(version)
	switch {
	case !ok:
		return SpellingUnknown
	case major > 0 || minor >= 8:
		return SpellingVLLMConfig
	}
	return SpellingVLLMLegacy
}

type pyCapsEntry struct {
	mtime time.Time
	size  int64
	caps  Caps
}

var (
	pyCapsMu  sync.Mutex
	pyCapsMem = map[string]pyCapsEntry{}
)

// sglangVersionProg asks the interpreter for the installed sglang
// distribution's version without importing sglang (which loads torch).
const sglangVersionProg = `import importlib.metadata as m, sys
try:
    print(m.version('sglang'))
except m.PackageNotFoundError:
    sys.exit('sglang is not installed in this interpreter')`

// DetectEngine reads the version (and for vLLM the flag spelling) of a
// vLLM or SGLang install: `vllm --version`, or for SGLang the interpreter's
// installed sglang distribution. Results are cached in memory per (path,
// mtime, size) of the binary; nothing is written to disk, since an
// interpreter's packages change under an unchanged binary.
func DetectEngine(ctx context.Context, e key.Engine, binary string) (Caps, error) {
	path, err := exec.LookPath(binary)
	if err != nil {
		return Caps{}, fmt.Errorf("%s binary %q not found: install %s or set engine.binary to its path: %w", e, binary, e, err)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Caps{}, fmt.Errorf("%s binary %q: %w", e, path, err)
	}
	pyCapsMu.Lock()
	defer pyCapsMu.Unlock()
	ck := string(e) + "\x00" + path
	if c, ok := pyCapsMem[ck]; ok && c.mtime.Equal(fi.ModTime()) && c.size == fi.Size() {
		return c.caps, nil
	}
	var caps Caps
	switch e {
	case key.VLLM:
		out, err := runBoundedArgs(ctx, PyDetectTimeout, path, "--version")
		if err != nil {
			return Caps{}, fmt.Errorf("running %s --version: %w: check that it is vLLM's `vllm` command", path, err)
		}
		v, _, _, ok := ParsePyVersion(out)
		if !ok {
			return Caps{}, fmt.Errorf("%s --version printed no version (%q): check that it is vLLM's `vllm` command", path, snippet([]byte(out)))
		}
		caps = Caps{Version: v, Spelling: VLLMSpellingFor(v)}
	case key.SGLang:
		out, err := runBoundedArgs(ctx, PyDetectTimeout, path, "-c", sglangVersionProg)
		if err != nil {
			return Caps{}, fmt.Errorf("asking %s for the sglang version: %w: set engine.binary to the Python interpreter SGLang is installed in", path, err)
		}
		v, _, _, ok := ParsePyVersion(out)
		if !ok {
			return Caps{}, fmt.Errorf("%s reported no sglang version (%q): set engine.binary to the Python interpreter SGLang is installed in", path, snippet([]byte(out)))
		}
		caps = Caps{Version: v}
	default:
		return Caps{}, fmt.Errorf("no version detection for engine %q", e)
	}
	pyCapsMem[ck] = pyCapsEntry{mtime: fi.ModTime(), size: fi.Size(), caps: caps}
	return caps, nil
}

// runBoundedArgs runs path with args under timeout and returns
// stdout+stderr.
func runBoundedArgs(ctx context.Context, timeout time.Duration, path string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return runCaptured(ctx, exec.CommandContext(ctx, path, args...), timeout)
}
