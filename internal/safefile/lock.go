package safefile

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// lockPoll is how often a waiting Locked tries the lock again.
const lockPoll = 50 * time.Millisecond

// Locked runs fn while it holds an exclusive lock on a file beside path
// (".NAME.lock", flock where the system has it, else fn runs unguarded), so that two
// processes that each read path, change it and replace it (two `tune`
// runs writing one layer) cannot lose each other's change: fn must read
// path again under the lock. It waits at most wait for the lock, and not
// past ctx; the lock file is left in place (empty), since removing it
// would race the next holder. The directory is created if missing.
func Locked(ctx context.Context, path string, wait time.Duration, fn func() error) error {
	name := lockName(path, "")
	deadline := time.Now().Add(wait)
	for {
		release, ok, err := Hold(name)
		if err != nil {
			return err
		}
		if ok {
			defer release()
			return fn()
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%s is being written by another process (its lock %s is held) after waiting %s", path, name, wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(lockPoll):
		}
	}
}

// lockName is the lock file beside path: ".NAME.lock", or ".NAME.WHAT.lock"
// for another lock on the same file (tune's run beside its write).
func lockName(path, what string) string {
	if what != "" {
		what = "." + what
	}
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+what+".lock")
}

// RunLock is the lock file tune holds (Hold) beside the layer path for its
// whole run; Locked's own is taken only for the write, so the two never
// wait on each other.
func RunLock(path string) string { return lockName(path, "tune") }

// Hold takes the exclusive lock on the file name (created if missing, left
// in place) without waiting and keeps it until release; ok false, with no
// error, when another process holds it. Systems without flock always get
// it. tune holds one for its whole sweep: two tunes run at once each
// measured under the other's load and the later write won.
//
// Something other than a regular file at name (a directory, a FIFO, a
// symlink to either) is refused with an *Error naming it and the fix,
// bad input: the lock file is speclaunch's own, made again once removed.
// The open does not block, so a FIFO there cannot hang it.
func Hold(name string) (release func(), ok bool, err error) {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return nil, false, err
	}
	f, err := os.OpenFile(name, os.O_RDONLY|os.O_CREATE|openFlags, 0o644)
	if err != nil {
		if fi, serr := os.Stat(name); serr == nil && !fi.Mode().IsRegular() {
			return nil, false, lockFileError(name, fi.Mode(), err)
		}
		return nil, false, err
	}
	if fi, err := f.Stat(); err == nil && !fi.Mode().IsRegular() {
		f.Close()
		return nil, false, lockFileError(name, fi.Mode(), nil)
	}
	busy, err := tryLock(f)
	if err != nil || busy {
		f.Close()
		if err != nil {
			err = fmt.Errorf("lock %s: %w", name, err)
		}
		return nil, false, err
	}
	return func() { f.Close() }, true, nil
}

// lockFileError refuses what stands at the lock file's path, of mode m,
// with the fix: remove it.
func lockFileError(name string, m fs.FileMode, err error) *Error {
	return &Error{What: "lock file", Path: name, Err: err,
		Msg: "is " + Kind(m) + ", not a regular file; remove it (speclaunch makes the lock file again, empty)"}
}
