package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestShippedSets(t *testing.T) {
	for _, name := range ShippedSets {
		ps, err := ShippedSet(name)
		if err != nil || len(ps) < 3 {
			t.Fatalf("%s: %d prompts, %v", name, len(ps), err)
		}
		for _, p := range ps {
			if strings.TrimSpace(p.Text) == "" || len(p.Text) > MaxPromptBytes {
				t.Errorf("%s/%s: %d bytes", name, p.Name, len(p.Text))
			}
		}
	}
	code, _ := ShippedSet("code")
	if code[0].Text != DefaultPrompt {
		t.Error("the code set does not start with the default prompt")
	}
	if _, err := ShippedSet("poetry"); err == nil || !strings.Contains(err.Error(), "shipped: code, prose") {
		t.Errorf("unknown set: %v", err)
	}
}

func TestReadPromptDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.txt", "second")
	write("a.txt", "first")
	write(".hidden", "skipped")
	ps, err := ReadPromptDir(context.Background(), dir)
	if err != nil || len(ps) != 2 || ps[0].Name != "a.txt" || ps[1].Text != "second" {
		t.Fatalf("%+v, %v", ps, err)
	}

	bad := func(t *testing.T, setup func(dir string), want string) {
		t.Helper()
		d := t.TempDir()
		setup(d)
		_, err := ReadPromptDir(context.Background(), d)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to contain %q", err, want)
		}
	}
	t.Run("fifo", func(t *testing.T) {
		bad(t, func(d string) {
			if err := syscall.Mkfifo(filepath.Join(d, "pipe"), 0o644); err != nil {
				t.Skip("no FIFOs here:", err)
			}
		}, "pipe: is a FIFO (named pipe), not a regular file")
	})
	t.Run("directory", func(t *testing.T) {
		bad(t, func(d string) { os.Mkdir(filepath.Join(d, "sub"), 0o755) }, "sub: is a directory, not a regular file")
	})
	t.Run("too big", func(t *testing.T) {
		bad(t, func(d string) {
			f, _ := os.Create(filepath.Join(d, "big.txt"))
			f.Truncate(MaxPromptBytes + 1)
			f.Close()
		}, "big.txt: file is larger than 1 MiB (1048576 bytes), the cap for a prompt file")
	})
	t.Run("a device", func(t *testing.T) {
		bad(t, func(d string) {
			if err := os.Symlink("/dev/zero", filepath.Join(d, "zero")); err != nil {
				t.Skip(err)
			}
		}, "zero: is a device, not a regular file")
	})
	t.Run("not utf-8", func(t *testing.T) {
		bad(t, func(d string) { os.WriteFile(filepath.Join(d, "bin"), []byte{0xff, 0xfe, 'x'}, 0o644) }, "bin is not UTF-8 text")
	})
	t.Run("empty file", func(t *testing.T) {
		bad(t, func(d string) { os.WriteFile(filepath.Join(d, "e.txt"), []byte(" \n"), 0o644) }, "e.txt is empty")
	})
	t.Run("no prompts", func(t *testing.T) {
		bad(t, func(d string) { os.WriteFile(filepath.Join(d, ".only-hidden"), []byte("x"), 0o644) }, "holds no prompt files")
	})
	if _, err := ReadPromptDir(context.Background(), filepath.Join(dir, "a.txt")); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("a file as the set: %v", err)
	}
}

// A set that is neither a directory nor a shipped one names the sets and
// the fix (before: a raw "stat nosuchset: no such file or directory").
func TestReadPromptDirMissing(t *testing.T) {
	for dir, want := range map[string]string{
		"nosuchset": "nosuchset is neither a directory nor a shipped set (shipped: code, prose): give --prompts code or --prompts prose, or the path of a directory of prompt files",
		"cod":       "(did you mean code? shipped: code, prose)",
	} {
		_, err := ReadPromptDir(context.Background(), dir) // neither is in internal/bench
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "stat ") {
			t.Errorf("%s: %v, want %q", dir, err, want)
		}
	}
}

// Ctrl-C (the command's context ending) stops a prompt read.
func TestReadPromptFileHonoursContext(t *testing.T) {
	f := filepath.Join(t.TempDir(), "p.txt")
	if err := os.WriteFile(f, []byte("def f(): pass\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ReadPromptFile(ctx, f); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if got, err := ReadPromptFile(context.Background(), f); err != nil || got != "def f(): pass\n" {
		t.Errorf("%q, %v", got, err)
	}
}
