package adapteval

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// status is the part of /speclaunch/status this package reads.
type status struct {
	Engine *struct {
		Width       int    `json:"width"`
		WidthSource string `json:"width_source"`
		URL         string `json:"url"` // the engine's own loopback URL, behind the proxy
	} `json:"engine"`
	Switches []struct {
		At     time.Time `json:"at"`
		Kind   string    `json:"kind"`
		Reason string    `json:"reason"`
		From   int       `json:"from_width"`
		To     int       `json:"to_width"`
		OK     bool      `json:"ok"`
		TookMS float64   `json:"took_ms"`
	} `json:"switches"`
	Adapt json.RawMessage `json:"adapt"`
}

// adaptStatus is the part of adapt.Status the settle rule reads (a copy,
// so this client depends only on the served JSON).
type adaptStatus struct {
	State string `json:"state"`
	Note  string `json:"note"`
	Width int    `json:"width"`
	// Decisions counts the loop's decisions (one an epoch); 0 from a
	// server that does not report it.
	Decisions int `json:"decisions"`
	// Checking is a switch the loop is still checking against the width
	// it left ("width 3 against width 4"): it may yet go back.
	Checking string `json:"checking"`
	Decision *struct {
		Running int    `json:"running"`
		Choice  int    `json:"choice"`
		Switch  bool   `json:"switch"`
		Reason  string `json:"reason"`
		Explore int    `json:"explore"`
		// ExploreIn: the loop holds that wider look this long (one a
		// re-check period); it stays meanwhile.
		ExploreIn int64 `json:"explore_in_ns"`
		// NoCost: the rule could not judge the running width (the curve
		// lacks the rows it verifies at the live concurrency).
		NoCost     bool `json:"no_cost"`
		Candidates []struct {
			Width int `json:"width"`
		} `json:"candidates"`
	} `json:"last_decision"`
}

func (st status) adapt() (adaptStatus, bool) {
	var a adaptStatus
	if len(st.Adapt) == 0 || string(st.Adapt) == "null" || json.Unmarshal(st.Adapt, &a) != nil || a.State == "" {
		return a, false
	}
	return a, true
}

// adapting says why a measurement is impossible: no adaptive loop, or one
// that stopped.
func (st status) adapting() error {
	a, ok := st.adapt()
	if !ok {
		return fmt.Errorf("the server reports no adaptive loop in /speclaunch/status: start it with `speclaunch serve --adapt` (no operator width) and give its public URL (the proxy)")
	}
	switch a.State {
	case "not adapting", "stopped":
		return fmt.Errorf("the adaptive loop is %s: %s", a.State, a.Note)
	}
	return nil
}

// settled is the rule for the end of phase 1: the loop is watching, the
// engine serves the width the loop last decided at, and that decision
// judged that width (it is among the candidates, and no_cost is not set),
// and neither switched nor asked to explore wider, nor is still checking
// its last switch against the width it left. The note says what it
// waits for, or why it holds. A decision that could not judge the running
// width is no settle: on an H200 (2026-12-02) the loop stayed at its
// exploration width 8 under 4 sequences because the verify cost of 32 rows
// was missing, and this rule called that "settled at width 8".
func settled(st status) (bool, string) {
	a, ok := st.adapt()
	switch {
	case !ok:
		return false, "no adapt status"
	case a.State != "watching":
		return false, "adaptive loop " + a.State
	case a.Decision == nil:
		return false, "no decision yet"
	case st.Engine == nil:
		return false, "no engine serving"
	case a.Decision.Running != st.Engine.Width || a.Width != st.Engine.Width:
		return false, fmt.Sprintf("last decision was at width %d; the engine now serves width %d", a.Decision.Running, st.Engine.Width)
	case a.Decision.Switch:
		return false, fmt.Sprintf("decided to switch %d→%d", a.Decision.Running, a.Decision.Choice)
	case a.Decision.Explore > 0 && a.Decision.ExploreIn <= 0:
		return false, fmt.Sprintf("exploring wider (width %d)", a.Decision.Explore)
	case a.Checking != "":
		return false, "checking " + a.Checking + ": it may go back"
	case a.Decision.NoCost:
		return false, fmt.Sprintf("the loop cannot judge the running width %d: %s%s", a.Decision.Running, a.Decision.Reason, noteOf(a))
	case !a.judged():
		return false, fmt.Sprintf("the last decision did not judge the running width %d: %s%s", a.Decision.Running, a.Decision.Reason, noteOf(a))
	}
	return true, fmt.Sprintf("stays at width %d: %s", a.Decision.Running, a.Decision.Reason)
}

// judged: the running width is among the last decision's candidates.
func (a adaptStatus) judged() bool {
	for _, c := range a.Decision.Candidates {
		if c.Width == a.Decision.Running {
			return true
		}
	}
	return false
}

// noteOf is the loop's own note, as a suffix of a settle note.
func noteOf(a adaptStatus) string {
	if a.Note == "" {
		return ""
	}
	return " (" + a.Note + ")"
}

// calm applies settled to two decisions in a row: phase 1 ends when a
// decision after the first one that settled still settles at the same
// width. One is not enough: a wider look the loop holds bars a trial only
// while the rule asks for it, and that ask comes and goes with the live
// acceptance (CI, 2026-12-03: the sim's collapse profile read as settled
// on one decision at 22 s, and the loop began a trial of width 3 two
// seconds later, under the direct window). A server that does not count
// its decisions settles on one.
type calm struct {
	first int // Decisions of the first decision that settled (0: none)
	width int
}

// next reads one status: settled as above, and the note.
func (c *calm) next(st status) (bool, string) {
	ok, note := settled(st)
	a, _ := st.adapt()
	switch {
	case !ok:
		c.first = 0
		return false, note
	case a.Decisions == 0: // an older server
		return true, note
	case c.first == 0 || a.Width != c.width:
		c.first, c.width = a.Decisions, a.Width
		return false, note + "; waiting for the next decision"
	case a.Decisions == c.first:
		return false, note + "; waiting for the next decision"
	}
	return true, note
}

func getStatus(ctx context.Context, o Options) (status, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	url := strings.TrimRight(o.URL, "/") + "/speclaunch/status"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return status{}, fmt.Errorf("server URL %q: %w", o.URL, err)
	}
	resp, err := o.Client.Do(req)
	if err != nil {
		return status{}, fmt.Errorf("GET %s: %w (is `speclaunch serve --adapt` running there?)", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return status{}, fmt.Errorf("GET %s: %s (is this speclaunch's public port, with the proxy on?)", url, resp.Status)
	}
	var st status
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&st); err != nil {
		return status{}, fmt.Errorf("GET %s: not speclaunch's status JSON: %w", url, err)
	}
	return st, nil
}
