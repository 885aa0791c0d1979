package instance

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/width"
)

const offText = "width 1: speculation off, the engine runs with no drafter"

// At width 1 every engine is verified with nothing read: the engine runs
// with no drafter (engine's TestWidthOneStartsNoDrafter), so an alert on
// speclaunch_width_verified does not fire because speculation is off.
func TestVerifyAtWidthOne(t *testing.T) {
	s, err := schedule.Parse("1:5,2-3:4,4+:1", "override")
	if err != nil {
		t.Fatal(err)
	}
	bucket := width.Resolution{Source: width.Override, Reason: "operator schedule", Schedule: s}.AtLoad(4)
	ress := map[string]width.Resolution{
		"schedule bucket 4+:1": bucket,
		"adaptive classic":     width.AdaptedTo(1, "classic is faster", key.Key{}),
		"no draft model":       {Source: width.Off, Reason: "no draft model: speculation is off"},
	}
	// What each engine says of itself with no drafter; read or not, it
	// changes nothing.
	lines := map[key.Engine]string{
		key.MLXCEL: "Starting BatchScheduler (max_batch_size=1, speculative=off)",
		key.Sim:    "Starting BatchScheduler (max_batch_size=1, speculative=off)",
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	for _, e := range key.Engines {
		for name, want := range ress {
			t.Run(string(e)+"/"+name, func(t *testing.T) {
				r := pyRunning(e, srv.URL, want)
				a, err := engine.For(e)
				if err != nil {
					t.Fatal(err)
				}
				r.Plan.Adapter = a
				if l := lines[e]; l != "" {
					r.observe(l)
				}
				got := r.Verify(context.Background(), true)
				if !got.Verified || got.Problem != "" || got.Text() != offText {
					t.Fatalf("verified %v, text %q (%+v); want verified, %q", got.Verified, got.Text(), got, offText)
				}
			})
		}
	}
}

// Text is what /speclaunch/status says of a check, whichever way it went.
func TestCheckText(t *testing.T) {
	cases := []struct {
		name string
		c    Check
		want string
	}{
		{"off", offCheck, offText},
		{"read and matches", Check{Verified: true, Observed: engine.Observation{Width: 4}, ReadFrom: "probe request, then /metrics"},
			"engine runs width 4, read from probe request, then /metrics"},
		{"mismatch", Check{Problem: "the engine runs width 6, not the resolved 4"}, "the engine runs width 6, not the resolved 4"},
		{"unverified", Check{Note: "probe disabled (--no-probe): width not verified"}, "probe disabled (--no-probe): width not verified"},
	}
	for _, c := range cases {
		if got := c.c.Text(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
