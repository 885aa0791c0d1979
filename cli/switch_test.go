package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/loadgen"
)

// withWidth returns the sim profile with draft.block_size set.
func withWidth(base string, w int) string {
	return strings.Replace(base, `kind = "dflash"`, fmt.Sprintf("kind = \"dflash\"\nblock_size = %d", w), 1)
}

// TestServeSwitchesFailNoRequest is the proxy's promise: under a bounded
// streaming load, three reloads in overlap mode and in drain mode, and a
// reload whose new engine fails to start, give no failed and no empty
// response.
func TestServeSwitchesFailNoRequest(t *testing.T) {
	t.Parallel() // see TestMain
	for _, mode := range []string{"overlap", "drain"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			port := freePort(t)
			prof := filepath.Join(dir, "p.toml")
			base := strings.Replace(simProfile(port, ""), "[server]\n", fmt.Sprintf("[server]\nswitch = %q\n", mode), 1)
			writeFile(t, prof, base)
			r := startServe(t, "--profile", prof)
			r.log.waitFor(t, `width verified width=4`, 1, 20*time.Second)

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan loadgen.Result, 1)
			go func() {
				res, _ := loadgen.Run(ctx, loadgen.Options{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Clients: 4, Duration: 9 * time.Second, Stream: true, MaxTokens: 12})
				done <- res
			}()
			time.Sleep(700 * time.Millisecond)
			for _, w := range []int{3, 5, 2} {
				renameOver(t, prof, withWidth(base, w))
				r.log.waitFor(t, `switched to_pid=\d+ width=`+fmt.Sprint(w)+` mode=`+mode, 1, 20*time.Second)
				time.Sleep(900 * time.Millisecond)
			}
			// A new engine that cannot start: the old one (overlap) or the
			// previous settings (drain) keep serving.
			renameOver(t, prof, strings.Replace(withWidth(base, 6), `"100ms"`, `"100ms", "--sim-fail-start"`, 1))
			r.log.waitFor(t, `failed to start`, 1, 20*time.Second)
			res := <-done
			t.Logf("load: %s", res)
			if res.Bad() != 0 {
				t.Errorf("%d failed and %d empty responses across the switches: %s\nlog:\n%s", res.Failed, res.Empty, res, r.log)
			}
			if res.OK < 20 {
				t.Errorf("only %d requests succeeded: the load did not run through the switches", res.OK)
			}
			// In drain mode the failed switch is recorded once the previous
			// settings serve again, after the log line above: wait for it.
			st := waitStatus(t, port, 20*time.Second, func(st statusDoc) bool { return st.SwitchesTotal >= 4 })
			if st.Engine == nil || st.Engine.Width != 2 {
				t.Errorf("status engine %+v, want width 2 serving after the failed switch", st.Engine)
			}
			if st.SwitchesTotal != 4 || len(st.Switches) != 4 || st.Switches[3].OK || st.Switches[3].Error == "" {
				t.Errorf("status shows %d switches %+v, want 3 and a failed fourth", st.SwitchesTotal, st.Switches)
			}
		})
	}
}

type statusDoc struct {
	Engine *struct {
		PID          int    `json:"pid"`
		InternalPort int    `json:"internal_port"`
		Width        int    `json:"width"`
		WidthSource  string `json:"width_source"`
	} `json:"engine"`
	SwitchesTotal int    `json:"switches_total"`
	SwitchMode    string `json:"switch_mode"`
	Public        string `json:"public"`
	Switches      []struct {
		Kind, Mode string
		OK         bool
		Error      string
	} `json:"switches"`
	Proxy struct {
		HeldNow       int   `json:"held_now"`
		RejectedTotal int64 `json:"rejected_total"`
	} `json:"proxy"`
}

func status(t *testing.T, port int) statusDoc {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/speclaunch/status", port))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st statusDoc
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// waitStatus polls /speclaunch/status until done holds or the timeout
// passes, and returns the last document read either way.
func waitStatus(t *testing.T, port int, timeout time.Duration, done func(statusDoc) bool) statusDoc {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		st := status(t, port)
		if done(st) || time.Now().After(deadline) {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// /speclaunch/status follows a reload: the switch mode it shows is the one
// the next switch uses, and the public address is where the proxy listens.
func TestStatusFollowsReload(t *testing.T) {
	r, prof, base, port := serveSim(t, "")
	writeFile(t, prof, strings.Replace(base, "[server]\n", "[server]\nswitch = \"drain\"\n", 1))
	r.log.waitFor(t, `engine command unchanged`, 1, 20*time.Second)
	if st := status(t, port); st.SwitchMode != "drain" {
		t.Errorf("status switch_mode %q after a reload to drain", st.SwitchMode)
	}
	port2 := freePort(t)
	moved := strings.Replace(base, fmt.Sprintf("port = %d", port), fmt.Sprintf("port = %d", port2), 1)
	writeFile(t, prof, withWidth(moved, 3))
	r.log.waitFor(t, `width verified width=3`, 1, 20*time.Second)
	if st := status(t, port2); st.Public != fmt.Sprintf("127.0.0.1:%d", port2) {
		t.Errorf("status public %q after the proxy moved to port %d", st.Public, port2)
	}
}
