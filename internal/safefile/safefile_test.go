package safefile

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/safefile/safefiletest"
)

const testCap = 4096

func TestReadFileShapes(t *testing.T) {
	p := safefiletest.Make(t, "policy.toml", 1<<40) // a terabyte, sparse
	dir := t.TempDir()
	p["small"] = filepath.Join(dir, "small")
	p["atcap"] = filepath.Join(dir, "atcap")
	p["null"] = "/dev/null"
	p["loop"], p["dangling"] = filepath.Join(dir, "loop"), filepath.Join(dir, "dangling")
	if err := errors.Join(os.Symlink(p["loop"], p["loop"]), os.Symlink("/nonexistent/x", p["dangling"])); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p["small"], []byte("schema = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p["atcap"], bytes.Repeat([]byte("x"), testCap), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, want string // want: "" for success, else a substring of the error
		size       int
		notExist   bool
	}{
		{name: "small", size: 11},
		{name: safefiletest.Empty, size: 0},
		{name: "atcap", size: testCap},
		{name: safefiletest.Dir, want: "is a directory, not a regular file; give the path of the policy file itself"},
		{name: safefiletest.FIFO, want: "is a FIFO (named pipe)"},
		{name: safefiletest.Socket, want: "is a socket"},
		{name: safefiletest.Device, want: "is a device"},
		{name: "null", want: "is a device"},
		{name: safefiletest.Huge, want: "file is larger than 4 KiB (4096 bytes), the cap for a policy file"},
		{name: safefiletest.Missing, want: "no such file; check the path", notExist: true},
		// A link that leads nowhere is named with its target and the fix.
		{name: "loop", want: "is a symlink to " + p["loop"] + ", which leads nowhere (too many levels of symbolic links); remove it or give another path"},
		{name: "dangling", want: "is a symlink to /nonexistent/x, which leads nowhere (no such file or directory); remove it or give another path", notExist: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b []byte
			var err error
			safefiletest.Within(t, func() { b, err = ReadFile(context.Background(), "policy file", p[tc.name], testCap) })
			if tc.want == "" {
				if err != nil || len(b) != tc.size {
					t.Fatalf("got %d bytes, %v; want %d bytes", len(b), err, tc.size)
				}
				return
			}
			var se *Error
			if !errors.As(err, &se) || se.Path != p[tc.name] || se.What != "policy file" {
				t.Fatalf("error %T %v: want a *Error naming the file", err, err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "policy file "+p[tc.name]+": ") {
				t.Fatalf("error %q: want it to name the file and say %q", err, tc.want)
			}
			if tc.notExist != errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("errors.Is(ErrNotExist) = %v for %v", !tc.notExist, err)
			}
			if tc.name == safefiletest.Huge && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%v does not wrap ErrTooLarge", err)
			}
		})
	}
}

// The cap's sentence takes "an" before a vowel: "the cap for a api key
// file" read wrong.
func TestTooLargeArticle(t *testing.T) {
	p := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), 20), 0o644); err != nil {
		t.Fatal(err)
	}
	for what, want := range map[string]string{"api key file": "the cap for an api key file;", "profile": "the cap for a profile;", "adaptive state": "the cap for an adaptive state;"} {
		if _, err := ReadFile(context.Background(), what, p, 10); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", what, err, want)
		}
	}
}

// TestOpenRechecksAfterOpen: a FIFO swapped in between the Stat and the
// open is caught by the check on the opened file, without blocking.
func TestOpenRechecksAfterOpen(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "regular")
	fifo := filepath.Join(dir, "fifo")
	if err := os.WriteFile(reg, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	stat = func(string) (fs.FileInfo, error) { return os.Stat(reg) }
	t.Cleanup(func() { stat = os.Stat })
	var err error
	safefiletest.Within(t, func() {
		var r *Reader
		if r, err = Open(context.Background(), "profile", fifo, testCap); err == nil {
			r.Close()
		}
	})
	if err == nil || !strings.Contains(err.Error(), "is a FIFO") {
		t.Fatalf("got %v, want the FIFO refused", err)
	}
}

func TestReadFileHonoursContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, bytes.Repeat([]byte("x"), 3*chunk), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ReadFile(ctx, "record", path, RecordLimit); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before opening: got %v", err)
	}
	// Cancelled between two chunks: the next Read stops.
	ctx, cancel = context.WithCancel(context.Background())
	r, err := Open(ctx, "record", path, RecordLimit)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 2*chunk)
	if n, err := r.Read(buf); n != chunk || err != nil {
		t.Fatalf("first read: %d, %v; want one chunk", n, err)
	}
	cancel()
	if _, err := r.Read(buf); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), path) {
		t.Fatalf("read after cancel: got %v", err)
	}
}

// FuzzReadFile: whatever the content and cap, ReadFile returns the file
// exactly when it fits, and ErrTooLarge otherwise.
func FuzzReadFile(f *testing.F) {
	f.Add([]byte{}, uint16(0))
	f.Add([]byte{}, uint16(10))
	f.Add([]byte("schema = 1\n"), uint16(11))
	f.Add([]byte("schema = 1\n"), uint16(10))
	f.Add(make([]byte, 5000), uint16(4096)) // what /dev/zero gives
	f.Add(bytes.Repeat([]byte("x"), chunk+1), uint16(65535))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, limit uint16) {
		path := filepath.Join(dir, "f")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := ReadFile(context.Background(), "prompt file", path, int64(limit))
		if len(data) <= int(limit) {
			if err != nil || !bytes.Equal(b, data) {
				t.Fatalf("%d bytes under cap %d: got %d bytes, %v", len(data), limit, len(b), err)
			}
			return
		}
		if !errors.Is(err, ErrTooLarge) || b != nil {
			t.Fatalf("%d bytes over cap %d: got %d bytes, %v", len(data), limit, len(b), err)
		}
	})
}

// SameFile tells the file opened from another put at the path before the
// open: a caller that refused links with an Lstat finds one swapped in.
func TestSameFile(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.Lstat(a)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(context.Background(), "cache file", a, testCap)
	if err != nil {
		t.Fatal(err)
	}
	if !r.SameFile(before) {
		t.Errorf("the file opened is not the one stat'ed")
	}
	r.Close()
	// a link to b replaces a after the Lstat
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b, a); err != nil {
		t.Fatal(err)
	}
	if r, err = Open(context.Background(), "cache file", a, testCap); err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.SameFile(before) {
		t.Errorf("a link swapped in reads as the file stat'ed before")
	}
}

// blockingFile opens path as a pipe whose writer never writes, passed off
// as a regular file: what /proc/kmsg is to the reader (a regular file the
// runtime polls, whose read waits for bytes that never come).
func blockingFile(t *testing.T) string {
	t.Helper()
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	pw := os.NewFile(uintptr(fds[1]), "writer")
	t.Cleanup(func() { pw.Close() })
	path := filepath.Join(t.TempDir(), "kmsg.toml")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	regular, _ := os.Stat(path)
	oldStat, oldFstat := fstat, stat
	t.Cleanup(func() { fstat, stat = oldStat, oldFstat })
	stat = func(string) (os.FileInfo, error) { return regular, nil }
	fstat = func(*os.File) (os.FileInfo, error) { return regular, nil }
	openHook = func(string) (*os.File, error) { return os.NewFile(uintptr(fds[0]), path), nil }
	t.Cleanup(func() { openHook = nil })
	return path
}

// A file that blocks on read is refused, naming it, once no byte came
// within StallLimit (issue 33: /proc/kmsg hung every command reading it).
func TestReadFileBlocking(t *testing.T) {
	path := blockingFile(t)
	var err error
	safefiletest.Within(t, func() { _, err = ReadFile(context.Background(), "profile", path, testCap) })
	var se *Error
	if !errors.As(err, &se) || !errors.Is(err, ErrBlocks) || se.Path != path || !strings.Contains(err.Error(), "blocks on read") {
		t.Fatalf("err = %v, want a refusal naming %s", err, path)
	}
}

// readCancelled opens a blocking file with StallLimit out of the way,
// reads it on a goroutine with cancel in the middle (before the read, or
// by the hook inside it) and returns the read's error.
func readCancelled(t *testing.T, hook func(cancel context.CancelFunc)) error {
	t.Helper()
	path := blockingFile(t)
	old := StallLimit
	StallLimit = time.Hour
	t.Cleanup(func() { StallLimit = old })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := Open(ctx, "profile", path, testCap)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if hook != nil {
		afterCheckHook = func() { hook(cancel) }
		t.Cleanup(func() { afterCheckHook = nil })
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 10))
		done <- err
	}()
	if hook == nil {
		cancel()
	}
	safefiletest.Within(t, func() { err = <-done })
	return err
}

// Ctrl-C wakes a read parked on such a file, whatever StallLimit is.
func TestReadFileBlockingCancel(t *testing.T) {
	if err := readCancelled(t, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// A cancel that lands between Read's check of the context and its
// deadline still ends the read: the deadline in the past that the cancel
// set could be overwritten by the read's own (a CI run blocked 10 s here).
func TestReadFileCancelInTheGap(t *testing.T) {
	err := readCancelled(t, func(cancel context.CancelFunc) {
		cancel()
		// Let context.AfterFunc's deadline land first: it runs on its
		// own goroutine, which this one yields to.
		for range 1000 {
			runtime.Gosched()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// Issue 33: a path with a newline was printed raw, over two lines.
func TestErrorQuotesPath(t *testing.T) {
	_, err := ReadFile(context.Background(), "profile", "a\nb.toml", testCap)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), `"a\nb.toml"`) {
		t.Errorf("err = %q", err)
	}
}

// The hint to write a pipe to a file is given for a FIFO only: a device
// (/dev/zero, a symlink to it) got it too.
func TestPipeHintForAFIFOOnly(t *testing.T) {
	shapes := safefiletest.Make(t, "f", 1)
	for _, tc := range []struct {
		shape string
		hint  bool
	}{{safefiletest.FIFO, true}, {safefiletest.Device, false}, {safefiletest.Socket, false}} {
		_, err := Open(context.Background(), "key file", shapes[tc.shape], 1<<10)
		if err == nil || strings.Contains(err.Error(), "to read from a pipe") != tc.hint {
			t.Errorf("%s: %v, want the pipe hint %v", tc.shape, err, tc.hint)
		}
	}
}
