package server

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/proxy"
	"github.com/speclaunch/speclaunch/internal/supervise"
	"github.com/speclaunch/speclaunch/internal/testenv"
	"github.com/speclaunch/speclaunch/internal/waitlog"
	"github.com/speclaunch/speclaunch/internal/waitlog/waitlogtest"
)

// Issue 33 C: every wait for an engine's requests says what it waits for
// and its bound. The machine gives each Watch its words: an overlap's old
// engine, a drain switch's, and a shutdown's, bounded by what is left of
// the shutdown timeout.
func TestWatchSaysItsWait(t *testing.T) {
	watchOf := func(out string, acts []Action) Watch {
		t.Helper()
		for _, a := range acts {
			if w, ok := a.(Watch); ok {
				return w
			}
		}
		t.Fatalf("%s: no Watch", out)
		return Watch{}
	}
	f := serving(t, limits)
	f.after(0, Submit{Job: job(KindReload, key.SwitchOverlap, planOf("--w", "3"))})
	var acts []Action
	f.m, acts = Step(f.m, Ready{ID: 2}, f.now)
	if w := watchOf("overlap", acts); w.Bound != limits.DrainTimeout || !strings.Contains(w.Before, "the old engine") || w.Then == "" {
		t.Errorf("overlap: %+v", w)
	}
	f = serving(t, limits)
	f.m, acts = Step(f.m, Submit{Job: job(KindReload, key.SwitchDrain, planOf("--w", "3"))}, f.now)
	if w := watchOf("drain", acts); w.Bound != limits.DrainTimeout || !strings.Contains(w.Before, "new requests wait") {
		t.Errorf("drain: %+v", w)
	}
	f = serving(t, limits)
	f.m, acts = Step(f.m, Signal{Sig: syscall.SIGTERM}, f.now)
	if w := watchOf("shutdown", acts); w.Bound != limits.ShutdownTimeout || w.Then != ", then they are cut" {
		t.Errorf("shutdown: %+v", w)
	}
}

// The shell says a drain that lasts past waitlog.Quiet with the requests
// in flight and the bound, and its end (fake clock: no sleeping).
func TestWatchWaitIsSaid(t *testing.T) {
	var buf bytes.Buffer
	clock := &waitlogtest.Clock{}
	rt := New(Options{Log: slog.New(slog.NewTextHandler(&buf, nil)), Clock: clock})
	b, err := proxy.NewBackend("http://127.0.0.1:1", "engine 1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt.engines[1] = &live{inst: &Instance{ID: 1, Backend: b}, ctx: ctx, cancel: cancel}
	var release []func()
	for range 3 {
		r, err := b.Track()
		if err != nil {
			t.Fatal(err)
		}
		release = append(release, r)
	}
	rt.watch(Watch{ID: 1, Before: ", the old engine, before it is stopped", Bound: 2 * time.Minute, Then: ", then it is stopped with them"})
	clock.Advance(waitlog.Quiet - time.Millisecond)
	if buf.Len() != 0 {
		t.Fatalf("said before %s: %s", waitlog.Quiet, buf.String())
	}
	clock.Advance(time.Millisecond)
	want := "still waiting for 3 requests to finish on engine 1, the old engine, before it is stopped (5s so far; up to 2m0s, then it is stopped with them)"
	if !strings.Contains(buf.String(), want) {
		t.Errorf("log:\n%s\nwant %q", buf.String(), want)
	}
	for _, r := range release {
		r()
	}
	if ev := <-rt.events; ev != (Drained{ID: 1}) {
		t.Errorf("event %#v", ev)
	}
	if !strings.Contains(buf.String(), "the wait for 3 requests to finish on engine 1") {
		t.Errorf("no end line:\n%s", buf.String())
	}
}

// An engine's stop that lasts (it ignores SIGTERM) is said with its pid
// and what comes at the bound; its end once it exits. Tier 2: a process.
func TestStopWaitIsSaid(t *testing.T) {
	testenv.E2E(t)
	t.Parallel()
	ready := make(chan struct{}, 1)
	proc, err := supervise.Start(context.Background(), supervise.Spec{
		Argv:   []string{"sh", "-c", `trap "" TERM; echo trapped; while :; do sleep 1; done`},
		OnLine: func(_, line string) { ready <- struct{}{} },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Signal(syscall.SIGKILL)
	<-ready
	buf := &lockedBuf{}
	clock := &waitlogtest.Clock{}
	rt := New(Options{Log: slog.New(slog.NewTextHandler(buf, nil)), Clock: clock})
	ctx, cancel := context.WithCancel(context.Background())
	rt.engines[1] = &live{inst: &Instance{ID: 1, Proc: proc}, limits: Limits{StopTimeout: 10 * time.Minute}, ctx: ctx, cancel: cancel}
	rt.stop(Stop{ID: 1, Sig: syscall.SIGTERM, Why: "reload"})
	clock.Advance(waitlog.Quiet)
	want := fmt.Sprintf("still waiting for engine 1 (pid %d) to exit after SIGTERM (5s so far; up to 10m0s, then SIGKILL)", proc.PID())
	if !strings.Contains(buf.String(), want) {
		t.Errorf("log:\n%s\nwant %q", buf.String(), want)
	}
	proc.Signal(syscall.SIGKILL)
	<-proc.Done()
}

type lockedBuf = testenv.Buffer

// An engine that stops answering /health is said after Quiet with how
// long until it is killed as hung, and the wait ends when it is reported.
// Tier 2: a process, and the liveness check's own (short) real ticks.
func TestSilenceIsSaid(t *testing.T) {
	testenv.E2E(t)
	t.Parallel()
	proc, err := supervise.Start(context.Background(), supervise.Spec{Argv: []string{"sleep", "60"}})
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Stop(time.Second)
	buf := &lockedBuf{}
	clock := &waitlogtest.Clock{Added: make(chan struct{}, 4)}
	rt := New(Options{Log: slog.New(slog.NewTextHandler(buf, nil)), Clock: clock})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := &live{inst: &Instance{ID: 1, Proc: proc, BaseURL: "http://127.0.0.1:1"}, ctx: ctx, cancel: cancel}
	go rt.liveness(l, 3*time.Second) // nothing listens: every check fails
	select {
	case <-clock.Added:
	case <-time.After(30 * time.Second):
		t.Fatal("no wait begun")
	}
	clock.Advance(waitlog.Quiet)
	want := fmt.Sprintf("still waiting for engine 1 (pid %d) to answer /health again (5s so far; up to ", proc.PID())
	if !strings.Contains(buf.String(), want) || !strings.Contains(buf.String(), "then it is killed as hung)") {
		t.Errorf("log:\n%s\nwant %q", buf.String(), want)
	}
	if ev := <-rt.events; ev != (Hung{ID: 1}) {
		t.Errorf("event %#v", ev)
	}
}

// A switch asked for while another runs waits for it; said should it last,
// and its end once the machine has no switch pending. With nothing serving
// what it waits for is an engine's start: it was called a switch.
func TestPendingWaitIsSaid(t *testing.T) {
	for _, tc := range []struct {
		serving *Engine
		what    string
	}{
		{&Engine{ID: 1}, "the switch under way to end before the one asked for during it"},
		{nil, "the engine starting to serve before the settings asked for during its start"},
	} {
		var buf bytes.Buffer
		clock := &waitlogtest.Clock{}
		rt := New(Options{Log: slog.New(slog.NewTextHandler(&buf, nil)), Clock: clock})
		j := &Job{Kind: KindReload, Reason: "reload: p.toml (write)"}
		rt.pending(j, tc.serving)
		rt.pending(j, tc.serving) // still pending: one wait
		clock.Advance(waitlog.Quiet)
		rt.pending(nil, tc.serving)
		rt.pending(nil, tc.serving)
		out := buf.String()
		if strings.Count(out, "still waiting for "+tc.what+" (reload: p.toml (write)) (5s so far)") != 1 ||
			strings.Count(out, "the wait for "+tc.what) != 1 {
			t.Errorf("log:\n%s", out)
		}
	}
}

// A Drained that no longer holds when the loop reads it (requests were
// routed to the engine since: a drain switch abandoned at SIGTERM gives
// the held ones to its draining engine) is not passed on, which would stop
// the engine under them; the wait is made again.
func TestStaleDrainedWaitsAgain(t *testing.T) {
	rt := New(Options{})
	b, err := proxy.NewBackend("http://127.0.0.1:1", "engine 1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rt.engines[1] = &live{inst: &Instance{ID: 1, Backend: b}, ctx: ctx, cancel: cancel}
	if rt.stale(Drained{ID: 1}) || rt.stale(Tick{}) {
		t.Fatal("a Drained that holds, or another event, taken as stale")
	}
	release, err := b.Track()
	if err != nil {
		t.Fatal(err)
	}
	if !rt.stale(Drained{ID: 1}) {
		t.Fatal("a Drained with a request in flight passed on")
	}
	select {
	case ev := <-rt.events:
		t.Fatalf("%T%+v before the request ended", ev, ev)
	default:
	}
	release()
	select {
	case ev := <-rt.events:
		if ev != (Drained{ID: 1}) {
			t.Fatalf("got %T%+v, want Drained", ev, ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no Drained once the request ended")
	}
}
