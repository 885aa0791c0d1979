package key

import (
	"strings"
	"testing"
)

// Issue 33: a 128 KB MLXCEL_ENGINE was echoed whole in its error (a 131 KB
// line); a value is quoted and cut.
func TestParseErrorsClipTheValue(t *testing.T) {
	long := strings.Repeat("x", 128<<10) + "\n"
	for name, err := range map[string]error{
		"engine":     func() error { _, err := ParseEngine(long); return err }(),
		"drafter":    func() error { _, err := ParseDrafter(long); return err }(),
		"quant":      func() error { _, err := ParseQuant(long); return err }(),
		"capability": func() error { _, err := ParseCapability(long); return err }(),
	} {
		if err == nil || len(err.Error()) > 300 || !strings.Contains(err.Error(), "(131073 bytes)") {
			t.Errorf("%s: %d-byte error: %.200s", name, len(err.Error()), err)
		}
	}
}
