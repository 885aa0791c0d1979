//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package safefile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// What stands at a lock file's path and is no regular file is refused,
// by Hold and by Locked, with an *Error (bad input: exit 2) naming the
// path and the fix, remove it; a FIFO there does not block the open.
// Before, a directory there gave "open ...: is a directory", exit 1, and
// a FIFO hung the open.
func TestLockFileNotARegularFile(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(t *testing.T, lock string)
		kind string // in the refusal; "" taken
	}{
		{"nothing there", func(t *testing.T, lock string) {}, ""},
		{"an empty file", func(t *testing.T, lock string) { must(t, os.WriteFile(lock, nil, 0o644)) }, ""},
		{"a directory", func(t *testing.T, lock string) { must(t, os.Mkdir(lock, 0o755)) }, "is a directory"},
		{"a FIFO", func(t *testing.T, lock string) { must(t, syscall.Mkfifo(lock, 0o644)) }, "is a FIFO (named pipe)"},
		{"a symlink to a directory", func(t *testing.T, lock string) {
			must(t, os.Mkdir(lock+".d", 0o755))
			must(t, os.Symlink(lock+".d", lock))
		}, "is a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			layer := filepath.Join(t.TempDir(), "tuned.toml")
			for _, lock := range []string{RunLock(layer), lockName(layer, "")} {
				c.make(t, lock)
			}
			done := make(chan error, 2)
			go func() {
				release, ok, err := Hold(RunLock(layer))
				if ok {
					release()
				}
				done <- err
				done <- Locked(context.Background(), layer, 0, func() error { return nil })
			}()
			for _, who := range []string{"Hold", "Locked"} {
				var err error
				select {
				case err = <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("%s blocked on what is at the lock's path", who)
				}
				var se *Error
				switch {
				case c.kind == "" && err != nil:
					t.Errorf("%s: %v", who, err)
				case c.kind != "" && (!errors.As(err, &se) || !strings.Contains(err.Error(), c.kind) || !strings.Contains(err.Error(), "remove it") || !strings.Contains(err.Error(), ".lock")):
					t.Errorf("%s: %v; want an *Error naming the lock file, %q and the fix", who, err, c.kind)
				}
			}
		})
	}
}
