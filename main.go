// Command speclaunch launches a speculative-decoding LLM server at the draft
// width measured to be best for the GPU, the target's weight format and the
// drafter, and measures widths on real hardware to earn new policy entries.
package main

import (
	"embed"
	_ "embed"
	"io/fs"
	"os"

	"github.com/speclaunch/speclaunch/internal/cli"
)

// policyTOML is the embedded width policy: data only, every entry backed by
// a committed record.
//
//go:embed policy.toml
var policyTOML []byte

// records are the committed bench records, so `policy check` can verify the
// embedded policy from any directory.
//
//go:embed docs/benchmark_results/*.md docs/benchmark_results/*.json
var records embed.FS

func main() {
	cli.Records, _ = fs.Sub(records, ".")
	os.Exit(cli.Main(os.Args[1:], policyTOML, os.Stdout, os.Stderr))
}
