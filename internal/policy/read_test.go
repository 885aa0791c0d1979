package policy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/safefile/safefiletest"
)

// TestReadFileShapes: a policy path that is not a usable file is refused at
// once, naming the file and what is wrong; an empty file is a policy error.
func TestReadFileShapes(t *testing.T) {
	p := safefiletest.Make(t, "mine.toml", safefile.PolicyLimit+1)
	want := safefiletest.Refused("4 MiB")
	want[safefiletest.Empty] = "missing schema: add `schema = 1`"
	for shape, msg := range want {
		t.Run(shape, func(t *testing.T) {
			var err error
			safefiletest.Within(t, func() { _, err = ReadFile(context.Background(), p[shape]) })
			if err == nil || !strings.Contains(err.Error(), p[shape]) || !strings.Contains(err.Error(), msg) {
				t.Fatalf("got %v; want an error naming %s and saying %q", err, p[shape], msg)
			}
			var se *safefile.Error
			var pe *ParseError
			if !errors.As(err, &se) && !errors.As(err, &pe) {
				t.Fatalf("%T is neither a *safefile.Error nor a *ParseError: the CLI would not call it bad input", err)
			}
		})
	}
}
