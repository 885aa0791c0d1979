package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/safefile/safefiletest"
)

func sparse(t *testing.T, path string, size int64, head []byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(head); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
}

// TestTargetQuantShapes: every shape of a wrong file reads as unknown, at
// once, with a note that names the file and what is wrong with it.
func TestTargetQuantShapes(t *testing.T) {
	// A header whose one KV claims a 512 MiB byte array: inside the file,
	// but past the header cap.
	var w ggufWriter
	w.WriteString("GGUF")
	w.u32(3)
	w.u64(0) // tensors
	w.u64(1) // kvs
	w.str("big.array")
	w.u32(9)
	w.u32(0)
	w.u64(512 << 20)
	capped := w.Bytes()

	for _, tc := range []struct {
		name string
		make func(t *testing.T, dir string) string // returns the target path
		note string
	}{
		{"config.json is a directory", func(t *testing.T, dir string) string {
			os.Mkdir(filepath.Join(dir, "config.json"), 0o755)
			return dir
		}, "is a directory"},
		{"config.json is a FIFO", func(t *testing.T, dir string) string {
			syscall.Mkfifo(filepath.Join(dir, "config.json"), 0o644)
			return dir
		}, "is a FIFO"},
		{"config.json is /dev/zero", func(t *testing.T, dir string) string {
			os.Symlink("/dev/zero", filepath.Join(dir, "config.json"))
			return dir
		}, "is a device"},
		{"config.json is huge", func(t *testing.T, dir string) string {
			sparse(t, filepath.Join(dir, "config.json"), safefile.ConfigLimit+1, []byte("{"))
			return dir
		}, "file is larger than 4 MiB"},
		{"config.json is empty", func(t *testing.T, dir string) string {
			os.WriteFile(filepath.Join(dir, "config.json"), nil, 0o644)
			return dir
		}, "not valid JSON"},
		{"gguf is a FIFO", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "m.gguf")
			syscall.Mkfifo(p, 0o644)
			return p
		}, "is a FIFO"},
		{"gguf is /dev/zero", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "m.gguf")
			os.Symlink("/dev/zero", p)
			return p
		}, "is a device"},
		{"gguf is empty", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "m.gguf")
			os.WriteFile(p, nil, 0o644)
			return p
		}, "truncated reading magic"},
		{"gguf is huge zeros", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "m.gguf")
			sparse(t, p, 1<<40, nil)
			return p
		}, "not a GGUF file"},
		{"gguf header past the cap", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "m.gguf")
			sparse(t, p, 1<<30, capped)
			return p
		}, "runs past the 256 MiB cap on a GGUF header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.make(t, t.TempDir())
			safefiletest.Within(t, func() {
				q, note := TargetQuant(context.Background(), path)
				if q != key.QuantUnknown || !strings.Contains(note, tc.note) {
					t.Errorf("TargetQuant = %s, %q; want unknown with %q", q, note, tc.note)
				}
				if d, ok := DrafterKind(context.Background(), path); ok {
					t.Errorf("DrafterKind = %s on a bad file", d)
				}
				if _, _, ok := DeclaredWidth(context.Background(), key.DFlash, path); ok {
					t.Error("DeclaredWidth read a bad file")
				}
			})
		})
	}
}

// TestReadGGUFCapOnStream: a reader with no size (a pipe) is read no
// further than the header cap either.
func TestReadGGUFCapOnStream(t *testing.T) {
	var w ggufWriter
	w.WriteString("GGUF")
	w.u32(3)
	w.u64(0)
	w.u64(1)
	w.str("big.array")
	w.u32(9)
	w.u32(0)
	w.u64(512 << 20)
	_, err := ReadGGUF(struct{ io.Reader }{bytes.NewReader(w.Bytes())})
	if err == nil || !strings.Contains(err.Error(), "cap on a GGUF header") {
		t.Fatalf("err = %v, want the header cap named", err)
	}
}

// The context variants stop reading when the command's context ends
// (Ctrl-C): a cancelled read is an unknown answer naming the cancellation.
func TestReadsHonourContext(t *testing.T) {
	dir := t.TempDir()
	gguf := filepath.Join(dir, "t.gguf")
	var w ggufWriter
	w.WriteString("GGUF")
	w.u32(3)
	w.u64(0)
	w.u64(0)
	if err := os.WriteFile(gguf, w.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	mlx := filepath.Join(dir, "mlx")
	os.Mkdir(mlx, 0o755)
	if err := os.WriteFile(filepath.Join(mlx, "config.json"), []byte(`{"model_type":"qwen3","quantization":{"bits":4,"group_size":64}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, p := range []string{gguf, mlx} {
		if q, note := TargetQuant(ctx, p); q != key.QuantUnknown || !strings.Contains(note, "context canceled") {
			t.Errorf("%s: %s (%s), want unknown after a cancel", p, q, note)
		}
		if q, note := TargetQuant(context.Background(), p); q == key.QuantUnknown {
			t.Errorf("%s: unknown without a cancel (%s)", p, note)
		}
	}
	if _, err := ReadGGUFFile(ctx, gguf); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadGGUFFile after a cancel: %v", err)
	}
}
