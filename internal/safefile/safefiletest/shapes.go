// Package safefiletest makes the shapes of file an operator may name by
// mistake, for the table tests of every reader that goes through safefile.
package safefiletest

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/speclaunch/speclaunch/internal/testenv"
)

// Shape names, the keys of Make's map.
const (
	Dir     = "directory"
	FIFO    = "fifo"
	Socket  = "socket"
	Device  = "device" // /dev/zero: endless NUL bytes if it were read
	Empty   = "empty"
	Huge    = "huge" // sparse, one byte over the cap
	Missing = "missing"
)

// Make creates one file of each shape under t's temporary directory, named
// name (so an error naming the file can be checked), and returns their
// paths by shape. overCap is the size of the Huge file.
func Make(t testing.TB, name string, overCap int64) map[string]string {
	t.Helper()
	dir := t.TempDir()
	p := map[string]string{}
	for _, s := range []string{Dir, FIFO, Device, Empty, Huge, Missing} {
		os.Mkdir(filepath.Join(dir, s), 0o755)
		p[s] = filepath.Join(dir, s, name)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(p[Dir], 0o755))
	must(syscall.Mkfifo(p[FIFO], 0o644))
	must(os.Symlink("/dev/zero", p[Device]))
	must(os.WriteFile(p[Empty], nil, 0o644))
	f, err := os.Create(p[Huge])
	must(err)
	must(f.Truncate(overCap))
	must(f.Close())
	// A unix socket path must stay short.
	sdir, err := os.MkdirTemp("", "sf")
	must(err)
	t.Cleanup(func() { os.RemoveAll(sdir) })
	p[Socket] = filepath.Join(sdir, "s")
	l, err := net.Listen("unix", p[Socket])
	must(err)
	t.Cleanup(func() { l.Close() })
	return p
}

// Refused maps each shape that must be refused to a phrase its error
// holds; capText is the cap as the error writes it ("4 MiB").
func Refused(capText string) map[string]string {
	return map[string]string{
		Dir:     "is a directory",
		FIFO:    "is a FIFO",
		Socket:  "is a socket",
		Device:  "is a device",
		Huge:    "file is larger than " + capText,
		Missing: "no such file",
	}
}

// Within runs f and fails t when it has not returned (testenv.Returns):
// no shape of file may block a reader.
func Within(t testing.TB, f func()) {
	t.Helper()
	testenv.Returns(t, "reading a file", f)
}
