package main

import (
	"os"
	"os/exec"
	"testing"

	"github.com/speclaunch/speclaunch/internal/testenv"
)

// TestBuildsForMacOS cross-compiles for darwin: the binary builds there
// (resolve, policy and profile work; serve and bench say that supervising an
// engine needs Linux, see internal/supervise/start_other.go).
func TestBuildsForMacOS(t *testing.T) {
	testenv.E2E(t)
	t.Parallel() // the end-to-end tests wait on their children together
	for _, arch := range []string{"arm64", "amd64"} {
		cmd := exec.Command("go", "build", "-o", os.DevNull, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=darwin", "GOARCH="+arch)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOOS=darwin GOARCH=%s go build: %v\n%s", arch, err, b)
		}
	}
}
