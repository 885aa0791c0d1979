//go:build linux

package engine

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/testenv"
)

// A binary whose --help starts a child of its own and hangs, ignoring
// SIGTERM, leaves nothing behind once the bound ends the wait: the child
// was orphaned to PID 1 at every launch (a final user pass).
func TestRunBoundedKillsTheGroup(t *testing.T) {
	for _, tc := range []struct {
		name, end, err string
	}{
		{"a --help that hangs", "wait\n", "timed out"},
		// A --help that exits while its child runs on (a review).
		{"a --help that exits", "echo usage\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) { groupLeavesNothing(t, tc.end, tc.err) })
	}
}

func groupLeavesNothing(t *testing.T, end, wantErr string) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	bin := filepath.Join(dir, "hang-engine")
	script := "#!/bin/sh\ntrap '' TERM INT\nsleep 1000 >/dev/null 2>&1 &\necho $! > " + pidFile + "\n" + end
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := runBoundedArgs(context.Background(), time.Second, bin, "--help")
	if wantErr == "" && err != nil || wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)) {
		t.Fatalf("err = %v, want %q", err, wantErr)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	testenv.WaitFor(t, "the --help's child gone", func() bool {
		// Gone, or a zombie its new parent has not reaped yet.
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return err != nil || strings.Contains(string(st), ") Z ")
	})
}
