package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/speclaunch/speclaunch/internal/quote"
)

// WriteFile writes b to path through a temporary file beside it and a
// rename, so that a reader (policy check, a watcher) never sees half a
// file, and a FIFO, device or dangling symlink at path is replaced, never
// written through (a symlink to a regular file is followed): a write to a
// FIFO with no reader would block for good, one to /dev/zero would vanish,
// one through a dangling symlink would create its target wherever it
// points. It is for the files an operator names and may link from
// elsewhere (profiles, the tuned layer, bench records); a file that is
// speclaunch's own (its cache) is written with WriteOwn.
func WriteFile(path string, b []byte, perm fs.FileMode) error {
	if li, err := os.Lstat(path); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		// A symlink to a regular file (a profile linked from elsewhere) is
		// written through, to its file, which is replaced the same way.
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() {
			if target, err := filepath.EvalSymlinks(path); err == nil {
				path = target
			}
		}
	}
	return Replace(path, b, perm)
}

// WriteOwn writes b to path as Replace does, for a file that is
// speclaunch's own (the adaptive state in its cache): a symlink at path,
// even to a regular file, is replaced by the file, never written through,
// since no operator's choice is kept there and writing through would
// overwrite (and chmod) whatever file the link names. link is the target
// of the symlink it replaced ("" where none was), for the caller to say.
func WriteOwn(path string, b []byte, perm fs.FileMode) (link string, err error) {
	if li, err := os.Lstat(path); err == nil && li.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(path); err != nil {
			link = "(unreadable: " + err.Error() + ")"
		}
	}
	if err := Replace(path, b, perm); err != nil {
		return "", err
	}
	return link, nil
}

// Replace writes b to path through a temporary file beside it and a
// rename: whatever is at path, a symlink included, is replaced, never
// written through. A reader sees the old file or the new one.
func Replace(path string, b []byte, perm fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync() // the rename must not publish a file whose data is not yet on disk
	}
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// Existing says what is at path, without following a final symlink or
// opening it: nothing (ok false), a regular file (or a symlink to one), or
// an *Error naming what else is there (a FIFO, a device, a directory, a
// dangling or looping symlink) and the fix. what names the file ("profile").
func Existing(what, path string) (exists bool, err error) {
	li, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, statError(what, path, err)
	}
	if li.Mode()&fs.ModeSymlink == 0 {
		if !li.Mode().IsRegular() {
			return true, &Error{What: what, Path: path, Msg: "is " + Kind(li.Mode()) + ", not a regular file; give the path of a new file"}
		}
		return true, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return true, nowhereError(what, path, err)
	}
	if !fi.Mode().IsRegular() {
		return true, &Error{What: what, Path: path, Msg: "is a symlink to " + Kind(fi.Mode()) + ", not to a regular file; give the path of a new file"}
	}
	return true, nil
}

// CheckDir says whether dir is an existing directory that takes a new
// file; it makes none, so a mistyped parent is refused, not created. It
// names the missing directory, or the file in the way of it.
func CheckDir(dir string) error {
	for d := dir; ; {
		fi, err := os.Stat(d)
		if err == nil && !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", d)
		}
		if err == nil && d != dir {
			return fmt.Errorf("directory %s does not exist", dir)
		}
		if err == nil {
			break
		}
		// Walk up past what is missing, and past a file in the way
		// (ENOTDIR), to say which of the two it is.
		if parent := filepath.Dir(d); (errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) && parent != d {
			d = parent
			continue
		}
		return err
	}
	f, err := os.CreateTemp(dir, ".speclaunch-write-check-*")
	if err != nil {
		return fmt.Errorf("cannot create files in %s: %w", dir, err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// nowhereError is the refusal of the symlink at path that leads nowhere
// (dangling, or a loop): err is what following it gave.
func nowhereError(what, path string, err error) *Error {
	return &Error{What: what, Path: path, Msg: "is a symlink " + leadsNowhere(path, err) + "; remove it or give another path", Err: err}
}

// leadsNowhere says where the symlink at path points and why that is no
// file ("to /gone/x, which leads nowhere (no such file or directory)"): the
// link's own name is in the error already, its target is what to fix.
func leadsNowhere(path string, err error) string {
	why := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		why = pe.Err.Error()
	}
	target, rerr := os.Readlink(path)
	if rerr != nil {
		return "that leads nowhere (" + why + ")"
	}
	return "to " + quote.Text(target, 0) + ", which leads nowhere (" + why + ")"
}
