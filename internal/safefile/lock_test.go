//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package safefile

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// While one holder runs, a second Locked on the same path is refused once
// its wait is spent, naming the path; after the first, it runs.
func TestLockedExcludes(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "tuned.toml")
	ran := 0
	err := Locked(ctx, path, 0, func() error {
		ran++
		err := Locked(ctx, path, 0, func() error { ran += 10; return nil })
		if err == nil || !strings.Contains(err.Error(), "is being written by another process") || !strings.Contains(err.Error(), path) {
			t.Errorf("a second holder: %v", err)
		}
		return nil
	})
	if err != nil || ran != 1 {
		t.Fatalf("first holder: %v, ran %d", err, ran)
	}
	if err := Locked(ctx, path, 0, func() error { ran += 100; return nil }); err != nil || ran != 101 {
		t.Errorf("after the first: %v, ran %d", err, ran)
	}
}

// While one Hold is held, a second is refused without error; after its
// release, the next gets it.
func TestHoldExcludes(t *testing.T) {
	name := filepath.Join(t.TempDir(), "sub", ".tuned.toml.tune.lock")
	release, ok, err := Hold(name)
	if err != nil || !ok {
		t.Fatalf("first: ok %v, %v", ok, err)
	}
	if r, ok, err := Hold(name); ok || err != nil {
		t.Errorf("second while the first holds: ok %v, %v", ok, err)
		if ok {
			r()
		}
	}
	release()
	r, ok, err := Hold(name)
	if !ok || err != nil {
		t.Fatalf("after the release: ok %v, %v", ok, err)
	}
	r()
}
