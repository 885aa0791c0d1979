package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/secret"
)

// BenchmarkSeedKeyFiles is the seeding of the redactor from key files
// named in engine arguments: a 1 MiB file of 116,508 keys named once (a
// profile show took 14.7 s), and a file of 1,000 keys named 1,000 times
// (each name was a read and a quadratic Add).
func BenchmarkSeedKeyFiles(b *testing.B) {
	for _, c := range []struct{ keys, names int }{{116508, 1}, {1000, 1000}} {
		b.Run(fmt.Sprintf("keys=%d/names=%d", c.keys, c.names), func(b *testing.B) {
			kf := filepath.Join(b.TempDir(), "keys.txt")
			var sb strings.Builder
			for i := range c.keys {
				fmt.Fprintf(&sb, "k%07d\n", i)
			}
			if err := os.WriteFile(kf, []byte(sb.String()), 0o600); err != nil {
				b.Fatal(err)
			}
			var args []string
			for range c.names {
				args = append(args, "--api-key-file", kf)
			}
			getenv := func(n string) string {
				if n == "LLAMA_ARG_API_KEY_FILE" {
					return kf
				}
				return ""
			}
			for b.Loop() {
				e := &Env{Ctx: context.Background(), secrets: &secret.Redactor{}}
				e.seedKeyFiles(args, getenv)
			}
		})
	}
}
