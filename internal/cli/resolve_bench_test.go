package cli

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/cuda"
	"github.com/speclaunch/speclaunch/internal/plan"
)

// BenchmarkResolveCommand is the whole `speclaunch resolve` path in-process
// (argv pre-pass, Kong, layering, policy parse and merge, facts, resolver,
// adapter, text output) with no GPU: nvidia-smi is absent from PATH.
func BenchmarkResolveCommand(b *testing.B) {
	b.Setenv("PATH", b.TempDir())
	d := plan.RealDeps()
	d.Probe = func(ctx context.Context) cuda.Result { return cuda.Probe(ctx, cuda.Options{}) }
	args := []string{"resolve", "-m", "target", "-md", "drafter", "--quant", "affine"}
	var out strings.Builder
	for b.Loop() {
		out.Reset()
		if code := MainContext(context.Background(), args, policyTOML, &out, io.Discard, &d); code != 0 {
			b.Fatalf("exit %d", code)
		}
	}
	if !strings.Contains(out.String(), "draft width 16 (per-kind default, no measurement for no CUDA device") {
		b.Fatalf("unexpected output:\n%s", out.String())
	}
}
