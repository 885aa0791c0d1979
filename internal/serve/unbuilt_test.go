package serve

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// A switch's rebuild says that the files on disk make no plan once for
// each fault, not at every switch (a user pass: the same four problems at
// each adaptive switch after a rejected edit); a new fault, or the same
// one after the files made a plan again, is said.
func TestUnbuiltSaidOnce(t *testing.T) {
	var log bytes.Buffer
	sv := &launcher{log: slog.New(slog.NewTextHandler(&log, nil))}
	a, b := errors.New("profile p.toml:3: bad port"), errors.New("profile p.toml:4: bad width")
	sv.sayUnbuilt("adaptive switch", a)
	sv.sayUnbuilt("adaptive switch", a)
	sv.sayUnbuilt("adaptive switch", b)
	sv.builtAgain()
	sv.sayUnbuilt("follow switch", b)
	if n := strings.Count(log.String(), "level=WARN"); n != 3 || strings.Count(log.String(), "bad port") != 1 {
		t.Errorf("%d warnings, want 3 (a once, b, b again after a good build):\n%s", n, log.String())
	}
}
