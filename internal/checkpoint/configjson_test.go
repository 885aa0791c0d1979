package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
)

// A config.json mlxcel's reader refuses says why: nested past its
// recursion limit (valid JSON, which a bare "not valid JSON" hid), or cut.
func TestConfigJSONSaysWhyItIsNotRead(t *testing.T) {
	for name, c := range map[string]struct{ body, want string }{
		"nested too deep": {strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000), "recursion limit exceeded"},
		"cut short":       {`{"quantization": {"bits": 4`, "unterminated object"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		q, why := TargetQuant(context.Background(), dir)
		if q != key.QuantUnknown || !strings.Contains(why, "config.json is not valid JSON to mlxcel's reader") || !strings.Contains(why, c.want) {
			t.Errorf("%s: %s %q, want unknown and %q", name, q, why, c.want)
		}
	}
}
