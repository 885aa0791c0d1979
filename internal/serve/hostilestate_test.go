package serve

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/adapt"
	"github.com/speclaunch/speclaunch/internal/control"
	"github.com/speclaunch/speclaunch/internal/schedule"
)

// A state holding nothing learnt is nothing to resume, and nothing is
// said, whatever its key: `"key": null` with `"pair": null` was warned as
// written for another engine or GPU. A learnt state of another engine
// still is.
func TestNullKeyAndPairSaysNothing(t *testing.T) {
	key := adapt.CacheKey{Engine: "sim", GPU: "none", Capability: "12.1"}
	for _, c := range []struct {
		name, body, warn string
	}{
		{"null key and pair", `{"key":null,"saved":"` + time.Now().Add(-time.Hour).Format(time.RFC3339) + `","pair":null}`, ""},
		{"nothing at all", `{}`, ""},
	} {
		file := filepath.Join(t.TempDir(), "adapt-control-x.json")
		if err := os.WriteFile(file, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		sh := &controlShell{c: control.New(control.Config{Default: schedule.Flat(4, "engine default")}), file: file, key: key, log: slog.New(slog.NewTextHandler(&log, nil))}
		sh.load()
		if sh.resumed != "" || log.Len() != 0 {
			t.Errorf("%s: resumed %q, log:\n%s", c.name, sh.resumed, log.String())
		}
	}
}

// A directory at the state file's path is named as one with its fix, at
// the read and once at the saves, where the read said "give the path of
// the adaptive state itself" (a path the operator never gives) and every
// save failed its rename.
func TestDirectoryAtTheStatePath(t *testing.T) {
	file := filepath.Join(t.TempDir(), "adapt-control-x.json")
	if err := os.Mkdir(file, 0o755); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	c := control.New(control.Config{Default: schedule.Flat(4, "engine default")})
	sh := &controlShell{c: c, file: file, log: slog.New(slog.NewTextHandler(&log, nil))}
	sh.load()
	s := c.Init(control.Pair{})
	sh.save(s, time.Now(), false)
	sh.save(s, time.Now(), false)
	l := log.String()
	if strings.Count(l, "a directory sits where speclaunch keeps its adaptive state file") != 1 || !strings.Contains(l, "remove that directory") ||
		!strings.Contains(l, "file="+file) || strings.Contains(l, "itself") || strings.Contains(l, "rename") {
		t.Errorf("log:\n%s", l)
	}
	// Made after the start: said once at the saves.
	log.Reset()
	sh.dirSaid = false
	sh.save(s, time.Now(), false)
	sh.save(s, time.Now(), false)
	if strings.Count(log.String(), "a directory sits") != 1 {
		t.Errorf("saves:\n%s", log.String())
	}
}
