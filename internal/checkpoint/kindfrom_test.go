package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

// KindFrom names what DrafterKind read: a GGUF file's metadata (a file,
// or a directory holding one GGUF and no config.json), else config.json.
// A GGUF drafter was said to differ from "the drafter's config.json",
// which it has none of.
func TestKindFrom(t *testing.T) {
	dir := t.TempDir()
	mk := func(p string) string {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	file := mk("draft.bin")
	mk("hf/config.json")
	g := mk("ggufdir/d.gguf")
	for path, want := range map[string]string{
		file:                               "the drafter's GGUF metadata (general.architecture in " + file + " gives kind draft)",
		filepath.Join(dir, "hf"):           "the drafter's config.json (draft)",
		filepath.Join(dir, "ggufdir"):      "the drafter's GGUF metadata (general.architecture in " + g + " gives kind draft)",
		filepath.Join(dir, "missing.gguf"): "the drafter's GGUF metadata",
		filepath.Join(dir, "missing"):      "the drafter's config.json (draft)",
	} {
		if got := KindFrom(path, key.Draft); !strings.HasPrefix(got, want) {
			t.Errorf("KindFrom(%s) = %q, want %q", path, got, want)
		}
	}
}
