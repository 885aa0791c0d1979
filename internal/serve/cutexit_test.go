package serve

import (
	"errors"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/exitcode"
)

// Issue 33: serve exited 0 after the shutdown timeout or a second signal
// cut requests. A clean exit with requests cut is exitcode.RequestsCut;
// every other exit keeps its code.
func TestCutExit(t *testing.T) {
	engineErr := errors.New("engine exited with code 1")
	for _, c := range []struct {
		code, cut, want int
		msg             string
	}{
		{0, 0, 0, ""},
		{0, 2, exitcode.RequestsCut, "stopped with 2 request(s) in flight cut"},
		{1, 2, 1, "engine exited"},
		{143, 1, 143, "engine exited"},
	} {
		in := error(nil)
		if c.code != 0 {
			in = engineErr
		}
		code, err := cutExit(c.code, in, c.cut)
		if code != c.want || (c.msg == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.msg)) {
			t.Errorf("cutExit(%d, cut %d) = %d, %v; want %d, %q", c.code, c.cut, code, err, c.want, c.msg)
		}
	}
}
