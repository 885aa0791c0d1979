// Command speclaunch launches a speculative-decoding LLM server at the draft
// width measured to be best for the GPU, the target's weight format and the
// drafter, and measures widths on real hardware to earn new policy entries.
package main

import (
	"embed"
	"os"

	"github.com/speclaunch/speclaunch/internal/cli"
)

// policyTOML is the embedded width policy: data only, every entry backed by
// a committed record.
//
//go:embed policy.toml
var policyTOML []byte

// records are the committed bench records the embedded policy's entries
// cite (and their .json twins), so `policy check` verifies the embedded
// policy from any directory. Only those: TestEmbeddedRecordsAreTheCitedOnes
// keeps this list equal to what policy.toml cites.
//
//go:embed docs/benchmark_results/draft-block-width-default-gb10-2026-09-20.md
//go:embed docs/benchmark_results/draft-block-width-default-gb10-2026-09-20.json
var records embed.FS

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.Embedded{Policy: policyTOML, Records: records}, os.Stdout, os.Stderr))
}
