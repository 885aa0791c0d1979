package waitlog_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/waitlog"
	"github.com/speclaunch/speclaunch/internal/waitlog/waitlogtest"
)

func TestMessage(t *testing.T) {
	for _, c := range []struct {
		what           string
		elapsed, bound time.Duration
		then, want     string
	}{
		{"engine 2 to load and answer /health", 5200 * time.Millisecond, 15 * time.Minute, "",
			"still waiting for engine 2 to load and answer /health (5s so far; up to 15m0s)"},
		{"3 requests to finish on engine 1 before it is stopped", 35 * time.Second, 2 * time.Minute, ", then they are cut",
			"still waiting for 3 requests to finish on engine 1 before it is stopped (35s so far; up to 2m0s, then they are cut)"},
		{"x", 35 * time.Second, 0, ", ignored without a bound", "still waiting for x (35s so far)"},
		{"engine 1 to answer", 5 * time.Second, 9600588173 * time.Nanosecond, ", then it is killed", "still waiting for engine 1 to answer (5s so far; up to 9.6s, then it is killed)"},
	} {
		if got := waitlog.Message(c.what, c.elapsed, c.bound, c.then); got != c.want {
			t.Errorf("Message(%q) = %q, want %q", c.what, got, c.want)
		}
	}
	if got := waitlog.Ended("x", 7260*time.Millisecond); got != "the wait for x ended after 7.3s" {
		t.Errorf("Ended = %q", got)
	}
}

// The rule on a fake clock: nothing before Quiet, a line at Quiet and every
// Repeat after, the end said only for a wait that was said, never twice.
func TestStart(t *testing.T) {
	type step struct {
		advance time.Duration
		end     bool
	}
	for _, c := range []struct {
		name  string
		steps []step
		want  []string // the lines, in order
	}{
		{"ends before Quiet: nothing", []step{{4999 * time.Millisecond, false}, {0, true}, {time.Minute, false}}, nil},
		{"at Quiet", []step{{waitlog.Quiet, false}}, []string{"still waiting for n=1 (5s so far; up to 2m0s, then SIGKILL)"}},
		{"said, then ended", []step{{6 * time.Second, true}, {time.Minute, true}},
			[]string{"still waiting for n=1 (5s so far; up to 2m0s, then SIGKILL)", "the wait for n=1 ended after 6s"}},
		{"every Repeat, what read anew", []step{{66 * time.Second, false}, {0, true}},
			[]string{"(5s so far;", "still waiting for n=2 (35s so far;", "still waiting for n=3 (1m5s so far;", "the wait for n=3 ended after 1m6s"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == "time" || a.Key == "level" {
					return slog.Attr{}
				}
				return a
			}}))
			clock := &waitlogtest.Clock{}
			n := 0
			end := waitlog.Start(log, clock, waitlog.Wait{For: func() string { n++; return "n=" + string(rune('0'+n)) }, Bound: 2 * time.Minute, Then: ", then SIGKILL"})
			for _, s := range c.steps {
				clock.Advance(s.advance)
				if s.end {
					end()
				}
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if buf.Len() == 0 {
				lines = nil
			}
			if len(lines) != len(c.want) {
				t.Fatalf("lines:\n%s\nwant %d: %q", buf.String(), len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("line %d: %s\nwant it to hold %q", i, lines[i], w)
				}
			}
		})
	}
}

// No logger, nothing said and nothing to stop.
func TestStartWithoutLog(t *testing.T) {
	clock := &waitlogtest.Clock{}
	end := waitlog.Start(nil, clock, waitlog.For("x", 0, ""))
	clock.Advance(time.Minute)
	end()
}
