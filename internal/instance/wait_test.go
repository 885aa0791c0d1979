package instance

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/testenv"
	"github.com/speclaunch/speclaunch/internal/waitlog"
	"github.com/speclaunch/speclaunch/internal/waitlog/waitlogtest"
)

// Issue 33 C: an engine's load that lasts is said with its bound, on a
// fake clock, and ends when the load ends (here an interrupt stops it).
// Tier 2: a process.
func TestLoadWaitIsSaid(t *testing.T) {
	testenv.E2E(t)
	t.Parallel()
	var s config.Settings
	s.Engine = config.Field[key.Engine]{Value: key.Sim}
	p := &plan.Plan{Settings: s, Adapter: mustAdapter(t), Launch: engine.Launch{
		Argv: []string{"sh", "-c", "sleep 60"}, BaseURL: "http://127.0.0.1:1"}}
	buf := &lockedBuf{}
	clock := &waitlogtest.Clock{Added: make(chan struct{}, 4)}
	interrupt, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := Start(context.Background(), p, Options{ReadyTimeout: 10 * time.Minute, StopTimeout: 10 * time.Second,
			Interrupt: interrupt, Log: slog.New(slog.NewTextHandler(buf, nil)), Name: "engine 9", Clock: clock})
		done <- err
	}()
	select { // the load's wait has begun
	case <-clock.Added:
	case <-time.After(30 * time.Second):
		t.Fatalf("no wait begun; log:\n%s", buf.String())
	}
	clock.Advance(waitlog.Quiet)
	if want := "still waiting for engine 9 to load and answer /health (5s so far; up to 10m0s, then it is stopped)"; !strings.Contains(buf.String(), want) {
		t.Errorf("log:\n%s\nwant %q", buf.String(), want)
	}
	stop()
	if err := <-done; !errors.Is(err, ErrInterrupted) {
		t.Errorf("Start: %v", err)
	}
	if !strings.Contains(buf.String(), "the wait for engine 9 to load and answer /health ended after 5s") {
		t.Errorf("no end line:\n%s", buf.String())
	}
}

func mustAdapter(t *testing.T) engine.Adapter {
	a, err := engine.For(key.Sim)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

type lockedBuf = testenv.Buffer
