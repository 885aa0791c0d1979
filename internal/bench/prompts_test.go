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

func TestContentHash(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "small.gguf")
	os.WriteFile(small, []byte("weights"), 0o644)
	got, err := ContentHash(small)
	if err != nil || got != shaHex("weights") { // a small file is hashed whole
		t.Errorf("small file: %s, %v", got, err)
	}

	// A large file is sampled: a change inside a sampled chunk changes the
	// hash, a change between samples does not (ContentMethod says so).
	big := filepath.Join(dir, "big.gguf")
	const size = 100 << 20
	f, _ := os.Create(big)
	f.Truncate(size)
	f.Close()
	h0, err := ContentHash(big)
	if err != nil {
		t.Fatal(err)
	}
	poke := func(off int64) string {
		t.Helper()
		f, _ := os.OpenFile(big, os.O_RDWR, 0)
		f.WriteAt([]byte{1}, off)
		f.Close()
		h, err := ContentHash(big)
		if err != nil {
			t.Fatal(err)
		}
		f, _ = os.OpenFile(big, os.O_RDWR, 0)
		f.WriteAt([]byte{0}, off)
		f.Close()
		return h
	}
	if poke(100) == h0 {
		t.Error("a change in the header did not change the hash")
	}
	if poke(3*size/17+10) == h0 {
		t.Error("a change in a sampled chunk did not change the hash")
	}
	if poke(size-5) == h0 {
		t.Error("a change in the last MiB did not change the hash")
	}
	if poke(4*size/17-(2<<20)) != h0 { // past the 16 MiB head, between the 3rd and 4th samples
		t.Error("a change between samples changed the hash: the method is not what ContentMethod states")
	}

	// a checkpoint directory hashes its files by relative path
	ck := filepath.Join(dir, "ck")
	os.Mkdir(ck, 0o755)
	os.WriteFile(filepath.Join(ck, "config.json"), []byte("{}"), 0o644)
	os.WriteFile(filepath.Join(ck, "model.safetensors"), []byte("w"), 0o644)
	d1, err := ContentHash(ck)
	if err != nil {
		t.Fatal(err)
	}
	os.Rename(filepath.Join(ck, "model.safetensors"), filepath.Join(ck, "model2.safetensors"))
	if d2, _ := ContentHash(ck); d2 == d1 {
		t.Error("renaming a file inside the checkpoint did not change its hash")
	}
	if _, err := ContentHash(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing model hashed")
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
