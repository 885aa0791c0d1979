package server

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/proxy"
	"github.com/speclaunch/speclaunch/internal/supervise"
	"github.com/speclaunch/speclaunch/internal/testenv"
	"github.com/speclaunch/speclaunch/internal/waitlog/waitlogtest"
)

// An old engine's end after speclaunch told it to stop is its stop only
// when its exit code says a signal speclaunch sent (SIGKILL once Stop may
// have sent it); one killed from outside as its drain ended (the kill cut
// its streams, which ended the drain, and the stop came after) is logged
// at error with the documented line, not as "old engine stopped".
func TestOldEngineEndedElsewhereIsAnError(t *testing.T) {
	clock := &waitlogtest.Clock{}
	term := []syscall.Signal{syscall.SIGTERM}
	for _, c := range []struct {
		name  string
		sent  sent
		sigs  []syscall.Signal // what speclaunch sent it (supervise.Process.Sent)
		code  int
		level string // "" = "old engine stopped" at info
	}{
		{"SIGTERM, exits 0", sent{}, term, 0, ""},
		{"SIGTERM, dies of it", sent{}, term, 143, ""},
		{"SIGTERM, exits 1 (its answer to SIGTERM)", sent{}, term, 1, ""},
		{"SIGKILL from outside before the stop timeout", sent{}, term, 137, "ERROR"},
		{"SIGKILL at the stop timeout (Stop's own)", sent{}, []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}, 137, ""},
		{"SIGKILL speclaunch sent (hung, third signal)", sent{}, []syscall.Signal{syscall.SIGKILL}, 137, ""},
		{"SIGINT forwarded, dies of it", sent{}, []syscall.Signal{syscall.SIGINT}, 130, ""},
		{"SIGSEGV (a crash)", sent{}, term, 139, "ERROR"},
		{"SIGINT speclaunch did not send", sent{}, term, 130, "ERROR"},
		{"exited before the stop, code 1", sent{exitedFirst: true}, term, 1, "ERROR"},
		{"exited before the stop, code 0", sent{exitedFirst: true}, nil, 0, "INFO"},
	} {
		sentSig := func(sig syscall.Signal) bool { return slices.Contains(c.sigs, sig) }
		var buf testenv.Buffer
		rt := New(Options{Log: slog.New(slog.NewTextHandler(&buf, nil)), Clock: clock})
		rt.sayOldStopped(&live{sent: c.sent}, 42, c.code, sentSig)
		out := buf.String()
		switch {
		case c.level == "" && (!strings.Contains(out, `level=INFO msg="old engine stopped"`) || strings.Contains(out, "drained")):
			t.Errorf("%s: want \"old engine stopped\" at info:\n%s", c.name, out)
		case c.level != "" && !strings.Contains(out, "level="+c.level+` msg="the old engine exited while it drained`):
			t.Errorf("%s: want \"the old engine exited while it drained\" at %s:\n%s", c.name, c.level, out)
		}
	}
}

// The campaign's case on a process: an old engine SIGKILLed from outside
// just before speclaunch's stop reaches it is logged at error, whichever
// came first to the shell (the exit or the stop); one that dies of
// speclaunch's SIGTERM is "old engine stopped". Tier 2: processes.
func TestOldEngineKilledFromOutsideIsAnError(t *testing.T) {
	testenv.E2E(t)
	t.Parallel()
	for _, outside := range []bool{true, false} {
		ready := make(chan struct{}, 1)
		proc, err := supervise.Start(context.Background(), supervise.Spec{
			Argv:   []string{"sh", "-c", `echo up; exec sleep 60`},
			OnLine: func(_, line string) { ready <- struct{}{} },
		})
		if err != nil {
			t.Fatal(err)
		}
		<-ready
		var buf testenv.Buffer
		rt := New(Options{Log: slog.New(slog.NewTextHandler(&buf, nil))})
		ctx, cancel := context.WithCancel(context.Background())
		l := &live{inst: &Instance{ID: 1, Proc: proc}, limits: Limits{StopTimeout: 10 * time.Minute}, ctx: ctx, cancel: cancel}
		rt.engines[1] = l
		if outside {
			syscall.Kill(proc.PID(), syscall.SIGKILL) // kill -9 <pid>
		}
		rt.stop(Stop{ID: 1, Why: "reload"})
		<-proc.Done()
		rt.sayOldStopped(l, proc.PID(), proc.ExitCode(), proc.Sent)
		out := buf.String()
		if outside && !strings.Contains(out, `level=ERROR msg="the old engine exited while it drained`) {
			t.Errorf("killed from outside (exit %d): want the error line:\n%s", proc.ExitCode(), out)
		}
		if !outside && !strings.Contains(out, `level=INFO msg="old engine stopped"`) {
			t.Errorf("stopped by speclaunch (exit %d): want \"old engine stopped\":\n%s", proc.ExitCode(), out)
		}
	}
}

// A cut's cause reaches the exit line: its Why, or where it has none (an
// engine that ended by itself) its What; the exit line otherwise fell back
// to "the shutdown timeout passed, or a second signal came".
func TestCutKeepsItsCause(t *testing.T) {
	for _, tc := range []struct {
		cause proxy.Cause
		want  string
	}{
		{stoppedBy("a second signal came"), "a second signal came"},
		{proxy.Cause{What: "the engine exited with code 0"}, "the engine exited with code 0"},
	} {
		rt := New(Options{})
		rt.exec([]Action{Cut{Cause: tc.cause}})
		if _, why := rt.Cut(); why != tc.want {
			t.Errorf("cause %+v: Cut says %q, want %q", tc.cause, why, tc.want)
		}
	}
}
