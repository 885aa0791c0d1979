//go:build !linux

package supervise

import (
	"context"
	"errors"
	"fmt"
	"runtime"
)

// ErrUnsupported is Start's error where supervision is not implemented.
var ErrUnsupported = errors.New("supervising an engine needs Linux")

// Start refuses: supervision relies on Linux's parent-death signal and
// waitid WNOWAIT (start_linux.go), without which an engine could outlive the
// launcher holding GPU memory. The rest of speclaunch (resolve, policy,
// profile) works here.
func Start(ctx context.Context, s Spec) (*Process, error) {
	return nil, fmt.Errorf("%w (this build is %s/%s): run `speclaunch resolve` for the engine command line and start it yourself, or run speclaunch on Linux", ErrUnsupported, runtime.GOOS, runtime.GOARCH)
}
