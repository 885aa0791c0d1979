package policy

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/safefile/safefiletest"
)

// TestReadFileShapes: a policy path that is not a usable file is refused at
// once, naming the file and what is wrong; an empty file is a policy error.
func TestReadFileShapes(t *testing.T) {
	p := safefiletest.Make(t, "mine.toml", safefile.PolicyLimit+1)
	for shape, want := range map[string]string{
		safefiletest.Dir:     "is a directory",
		safefiletest.FIFO:    "is a FIFO",
		safefiletest.Socket:  "is a socket",
		safefiletest.Device:  "is a device",
		safefiletest.Huge:    "file is larger than 4 MiB",
		safefiletest.Missing: "no such file",
		safefiletest.Empty:   "missing schema: add `schema = 1`",
	} {
		t.Run(shape, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := ReadFile(context.Background(), p[shape]); done <- err }()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("ReadFile blocked")
			}
			if err == nil || !strings.Contains(err.Error(), p[shape]) || !strings.Contains(err.Error(), want) {
				t.Fatalf("got %v; want an error naming %s and saying %q", err, p[shape], want)
			}
			var se *safefile.Error
			var pe *ParseError
			if !errors.As(err, &se) && !errors.As(err, &pe) {
				t.Fatalf("%T is neither a *safefile.Error nor a *ParseError: the CLI would not call it bad input", err)
			}
		})
	}
}
