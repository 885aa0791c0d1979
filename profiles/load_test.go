package profiles

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/safefile"
	"github.com/speclaunch/speclaunch/internal/safefile/safefiletest"
)

// TestLoadShapes: a profile path that is not a usable file is refused at
// once with a *safefile.Error naming it; an empty profile is a valid one.
func TestLoadShapes(t *testing.T) {
	p := safefiletest.Make(t, "p.toml", safefile.ProfileLimit+1)
	for shape, want := range map[string]string{
		safefiletest.Dir:     "is a directory",
		safefiletest.FIFO:    "is a FIFO",
		safefiletest.Socket:  "is a socket",
		safefiletest.Device:  "is a device",
		safefiletest.Huge:    "file is larger than 4 MiB",
		safefiletest.Missing: "no such file",
		safefiletest.Empty:   "",
	} {
		t.Run(shape, func(t *testing.T) {
			type result struct {
				p   *Profile
				err error
			}
			done := make(chan result, 1)
			go func() { pr, err := Load(context.Background(), p[shape]); done <- result{pr, err} }()
			var r result
			select {
			case r = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Load blocked")
			}
			if want == "" {
				if r.err != nil || r.p.Path != p[shape] {
					t.Fatalf("got %+v, %v; want an empty profile", r.p, r.err)
				}
				return
			}
			var se *safefile.Error
			if !errors.As(r.err, &se) || !strings.Contains(r.err.Error(), p[shape]) || !strings.Contains(r.err.Error(), want) {
				t.Fatalf("got %v; want a *safefile.Error naming %s and saying %q", r.err, p[shape], want)
			}
		})
	}
}
