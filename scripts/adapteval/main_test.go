package main

import (
	"os"
	"path/filepath"
	"testing"
)

// Bad input exits 2 before any request is sent.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.txt"), []byte("def f():"), 0o644)
	empty := t.TempDir()
	for _, args := range [][]string{
		{},
		{"-prompts", dir, "extra"},
		{"-prompts", dir, "-measure", "5s", "-requests", "3"},
		{"-prompts", dir, "-clients", "0"},
		{"-prompts", dir, "-temperature", "-1"},
		{"-prompts", dir, "-length-spread", "1"},
		{"-prompts", dir, "-length-spread", "-0.1"},
		{"-prompts", empty},
		{"-prompts", filepath.Join(dir, "missing")},
		{"-prompts", dir, "-no-such-flag"},
		{"-prompts", dir, "-url", "http://127.0.0.1:1", "-settle-timeout", "1s"}, // nothing listens
	} {
		if code := run(args); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
}
