package serve

import (
	"bytes"
	"encoding/json"
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

// TestControlLoadFitsSavedBuckets: a state saved under the fixed buckets,
// read by a run whose starting schedule splits them (1-3:6,4+:1), resumes
// on this run's buckets, says so once in the log, and runs width 1 at 4.
func TestControlLoadFitsSavedBuckets(t *testing.T) {
	key := adapt.CacheKey{Engine: "sim", GPU: "none", Capability: "12.1"}
	flat := control.New(control.Config{Default: schedule.Flat(4, "engine default")})
	p := flat.Init(control.Pair{}).Pair
	p.Schedule[0].Width, p.Schedule[0].Source = 8, "measured"
	file := filepath.Join(t.TempDir(), "adapt-control-x.json")
	b, err := json.Marshal(savedPair{Key: key, Saved: time.Unix(1_800_000_000, 0), Pair: p})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	tuned, err := schedule.Parse("1-3:6,4+:1", "tuned")
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	sh := &controlShell{c: control.New(control.Config{Default: tuned}), file: file, key: key, log: slog.New(slog.NewTextHandler(&log, nil))}
	got := sh.load()
	if s := got.Schedule.String(); s != "1:8,2-3:6,4:1,5-8:1,9+:1" {
		t.Errorf("resumed schedule %s, want 1:8,2-3:6,4:1,5-8:1,9+:1", s)
	}
	if n := strings.Count(log.String(), "are not this run's"); n != 1 || !strings.Contains(log.String(), "kept: 1, 5-8, 9+") {
		t.Errorf("the log says the buckets changed %d times, want once with what was kept:\n%s", n, log.String())
	}
}
