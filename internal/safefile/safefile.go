// Package safefile opens the files an operator names (profiles, policy
// files, config.json, GGUF headers, prompt files, bench records) so that a
// wrong path can never hang or exhaust the launcher: a directory, FIFO,
// socket or device is refused before anything is read, a file larger than
// its cap is refused rather than read whole, and every read honours a
// context so Ctrl-C stops it. The caps and the reasons for them are in
// docs/file-limits.md.
package safefile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/speclaunch/speclaunch/internal/quote"
)

// Caps, in bytes, for each kind of input (docs/file-limits.md). Each is far
// above any real file of its kind and far below what would hurt a host.
const (
	ProfileLimit = 1 << 20   // a profile is a few KiB of TOML
	PolicyLimit  = 4 << 20   // 20,000 entries of TOML are about 4 MiB
	ConfigLimit  = 4 << 20   // a model's config.json is a few KiB
	GGUFLimit    = 256 << 20 // a GGUF header: KVs (the vocabulary) and tensor infos
	PromptLimit  = 1 << 20   // one bench prompt: a few hundred tokens of text
	RecordLimit  = 64 << 20  // a bench record's .json or .md
	KeyFileLimit = 1 << 20   // an engine's API key file: a key per line
)

// KeyFileReader reads an engine's API key file as serve, bench and the
// sim engine read it: bounded by KeyFileLimit, named in its errors; the
// one reader secret.Keys is given.
func KeyFileReader(ctx context.Context) func(path string) ([]byte, error) {
	return func(path string) ([]byte, error) { return ReadFile(ctx, "api key file", path, KeyFileLimit) }
}

// stat is os.Stat; a test replaces it to reach the check after the open.
var stat = os.Stat

// fstat looks at the opened file; a test replaces it to pass off a pipe as
// a regular file that blocks on read (as /proc/kmsg does).
var fstat = (*os.File).Stat

// openHook, when set, opens in place of the file system (tests).
var openHook func(path string) (*os.File, error)

func openFile(path string) (*os.File, error) {
	if openHook != nil {
		return openHook(path)
	}
	return os.OpenFile(path, os.O_RDONLY|openFlags, 0)
}

// OpenRegular opens path for random reads (a model file hashed by
// samples), as Open does: without blocking on a FIFO swapped in after the
// caller's Stat, and refusing what the opened file is if it is not a
// regular file.
func OpenRegular(what, path string) (*os.File, error) {
	f, err := openFile(path)
	if err != nil {
		return nil, statError(what, path, err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = checkMode(what, path, fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// StallLimit is how long one read of a file that can block (one the
// runtime polls, as /proc/kmsg: a real file on disk never is) may wait for
// a byte before the file is refused as one that blocks on read. A read of
// a file on disk returns at once; half a second keeps the refusal under
// the second docs/file-limits.md promises. A variable for tests.
var StallLimit = 500 * time.Millisecond

// chunk is how much is read between two looks at the context.
const chunk = 64 << 10

// Error is every refusal: the file, what it was read as, what is wrong and
// what to do. It is bad input (exit code 2 at the top level).
type Error struct {
	What string // "profile", "policy file", "config.json", "GGUF file", "prompt file", "record"
	Path string
	Msg  string // what is wrong and the fix
	Err  error  // the underlying error, if any
}

// Error names the path as an operator can read it: one with a newline or
// a control character is quoted, a very long one cut (internal/quote).
func (e *Error) Error() string { return e.What + " " + quote.Text(e.Path, 0) + ": " + e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// ErrTooLarge is wrapped by the error for a file over its cap.
var ErrTooLarge = errors.New("file is larger than its cap")

// ErrBlocks is wrapped by the error for a file whose read waits for bytes
// that may never come (/proc/kmsg).
var ErrBlocks = errors.New("file blocks on read")

// ReadFile reads the whole regular file at path, at most limit bytes, as
// what ("policy file"). It refuses anything but a regular file, a file over
// limit, and stops with ctx's error when ctx ends.
func ReadFile(ctx context.Context, what, path string, limit int64) ([]byte, error) {
	r, err := Open(ctx, what, path, limit)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	size := r.Size()
	if size > limit {
		size = limit
	}
	buf := make([]byte, 0, size+1)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// Reader reads one opened regular file: at most its cap, and never after
// its context ends.
type Reader struct {
	ctx   context.Context
	f     *os.File
	what  string
	path  string
	limit int64
	size  int64
	n     int64       // bytes read so far
	fi    os.FileInfo // what was opened
	// polled: the runtime polls the file (it can block on read, as
	// /proc/kmsg does): each read has a deadline, and ctx's end sets it
	// to now, which wakes a parked read (stop undoes that on Close).
	polled bool
	stop   func() bool
}

// Open opens path as what for reading with the checks ReadFile makes; the
// caller closes it. Reading past limit bytes fails with an error wrapping
// ErrTooLarge, so a reader that stops early (a GGUF header) may open a file
// larger than limit.
func Open(ctx context.Context, what, path string, limit int64) (*Reader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Stat first: a FIFO or a device is refused without being opened at
	// all (opening a FIFO waits for a writer, and some devices act on open).
	fi, err := stat(path)
	if err != nil {
		return nil, statError(what, path, err)
	}
	if err := checkMode(what, path, fi.Mode()); err != nil {
		return nil, err
	}
	// Open non-blocking, then look again at what was opened: a FIFO
	// swapped in after the Stat must not block the open or the reads.
	f, err := openFile(path)
	if err != nil {
		return nil, statError(what, path, err)
	}
	fi, err = fstat(f)
	if err == nil {
		err = checkMode(what, path, fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	r := &Reader{ctx: ctx, f: f, what: what, path: path, limit: limit, size: fi.Size(), fi: fi, stop: func() bool { return false }}
	// A deadline can be set only on a file the runtime polls; reads of
	// any other block in the kernel for no longer than the disk takes.
	if f.SetReadDeadline(time.Time{}) == nil {
		r.polled = true
		r.stop = context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
	}
	return r, nil
}

// SameFile says whether the file opened is the one fi describes: a caller
// that refuses symbolic links (an Lstat before Open) checks that none was
// put in place between the two.
func (r *Reader) SameFile(fi os.FileInfo) bool { return os.SameFile(r.fi, fi) }

// Size is the file's size when opened.
func (r *Reader) Size() int64 { return r.size }

// Close closes the file.
func (r *Reader) Close() error {
	r.stop()
	return r.f.Close()
}

// afterCheckHook runs in Read between its check of the context and its
// deadline (tests: a cancel in that gap).
var afterCheckHook func()

// Read reads at most one chunk, after checking the context, and fails once
// more than the cap has been read.
func (r *Reader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, fmt.Errorf("reading %s %s: %w", r.what, r.path, err)
	}
	if r.n > r.limit {
		return 0, r.tooLarge()
	}
	if len(p) > chunk {
		p = p[:chunk]
	}
	// Read one byte past the cap so that a file of exactly limit bytes
	// reads whole and one of limit+1 is refused.
	if left := r.limit + 1 - r.n; int64(len(p)) > left {
		p = p[:left]
	}
	if r.polled {
		if afterCheckHook != nil {
			afterCheckHook()
		}
		r.f.SetReadDeadline(time.Now().Add(StallLimit))
		if r.ctx.Err() != nil {
			// Cancelled after the check above: the cancel's deadline in
			// the past may have come before this one and been overwritten.
			r.f.SetReadDeadline(time.Unix(1, 0))
		}
	}
	n, err := r.f.Read(p)
	r.n += int64(n)
	if r.n > r.limit {
		return n, r.tooLarge()
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if cerr := r.ctx.Err(); cerr != nil {
			return n, fmt.Errorf("reading %s %s: %w", r.what, r.path, cerr)
		}
		return n, &Error{What: r.what, Path: r.path, Err: ErrBlocks,
			Msg: fmt.Sprintf("blocks on read (no byte in %v: a kernel log or device-like file, such as /proc/kmsg); give the path of the %s itself", StallLimit, r.what)}
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return n, &Error{What: r.what, Path: r.path, Msg: "cannot read: " + err.Error(), Err: err}
	}
	return n, err
}

func (r *Reader) tooLarge() error {
	return &Error{What: r.what, Path: r.path, Err: ErrTooLarge,
		Msg: fmt.Sprintf("file is larger than %s (%d bytes), the cap for %s %s; check that this is the file you meant (caps: docs/file-limits.md)", human(r.limit), r.limit, Article(r.what), r.what)}
}

// Article is "an" before a word that starts with a vowel (an api key file,
// an adaptive state), else "a".
func Article(word string) string {
	if word != "" && strings.ContainsRune("aeiouAEIOU", rune(word[0])) {
		return "an"
	}
	return "a"
}

// checkMode refuses everything but a regular file.
func checkMode(what, path string, m fs.FileMode) error {
	if m.IsRegular() {
		return nil
	}
	msg := "is " + Kind(m) + ", not a regular file; give the path of the " + what + " itself"
	if m&fs.ModeNamedPipe != 0 {
		msg += " (to read from a pipe, write it to a file first)"
	}
	return &Error{What: what, Path: path, Msg: msg}
}

// Kind names what a file that is not a regular one is, for an error
// message: "a directory", "a FIFO (named pipe)", "a socket", "a device".
func Kind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file (" + m.Type().String() + ")"
}

// Nowhere says, for a path whose stat failed with err, whether it is a
// symlink that leads nowhere (dangling, or a loop), and where it points
// ("to /gone/x, which leads nowhere (no such file or directory)").
func Nowhere(path string, err error) (string, bool) {
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ELOOP) {
		return "", false
	}
	if li, lerr := os.Lstat(path); lerr != nil || li.Mode()&fs.ModeSymlink == 0 {
		return "", false
	}
	return leadsNowhere(path, err), true
}

// statError is the refusal of a path that could not be looked at or
// opened: what is wrong and what to do, a symlink that leads nowhere named
// with its target, as Existing names one.
func statError(what, path string, err error) error {
	if _, ok := Nowhere(path, err); ok {
		return nowhereError(what, path, err)
	}
	fix := "check the path"
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fix = "no such file; check the path"
	case errors.Is(err, fs.ErrPermission):
		fix = "permission denied; make it readable by this user"
	default:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			fix = pe.Err.Error() + "; check the path"
		}
	}
	return &Error{What: what, Path: path, Msg: fix, Err: err}
}

func human(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}
