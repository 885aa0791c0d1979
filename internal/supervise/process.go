// Package supervise runs one engine child process: in its own process group,
// tied to the launcher's life, with its output prefixed and remembered, and
// stopped by SIGTERM to the whole group with SIGKILL after a timeout.
//
// Supervision needs Linux (start_linux.go: a parent-death signal and
// waitid WNOWAIT, so no engine outlives the launcher or leaves its group
// behind); elsewhere the package builds and Start says it is unsupported.
//
// The design follows llama-swap's runtime_unix.go (Setpgid, signal the
// group, escalate) and consul-template's child package (Start, Signal, Stop,
// a done channel). Restart decisions belong to the caller; Backoff is the
// only policy here.
package supervise

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/speclaunch/speclaunch/internal/secret"
)

// Spec describes the child to start.
type Spec struct {
	Argv []string // Argv[0] is looked up in PATH unless it contains a slash
	Env  []string // nil inherits the launcher's environment (os/exec semantics)
	Dir  string

	// Prefix is put before every line of child output, e.g. "engine | ".
	// With Prefix "" and Raw true the bytes pass through as they come, which
	// keeps an engine's own progress bars and colours intact; bytes that
	// may begin a secret the writer redacts wait for the next read.
	Prefix string
	Raw    bool

	// Format, when set, renders each line for Stdout/Stderr in place of
	// Prefix, trailing newline included: e.g. one JSON object per line, so
	// that a JSON log stays JSON with the engine's lines in it. Raw (with no
	// Prefix) still wins: the bytes then pass through as they come (Secrets redacted).
	Format func(stream, line string) []byte

	// Stdout and Stderr receive the child's output streams; nil discards
	// (lines still reach OnLine and Tail). The same writer may be given for
	// both: writes are serialised.
	Stdout, Stderr io.Writer

	// Secrets are redacted from every line (what Stdout, Stderr, OnLine
	// and Tail get) before a long line is cut, and from raw output before
	// a read is written, the bytes that may begin a secret held for the
	// next read: a secret cut in two matches neither half. Nil redacts
	// nothing.
	Secrets *secret.Redactor

	// OnLine is called for every complete child line (without the newline)
	// with stream "stdout" or "stderr", e.g. to spot the engine's width line.
	// It runs on the output goroutine, so it must be cheap and not block.
	OnLine func(stream, line string)

	// TailLines is how many of the last lines Tail keeps for error messages
	// (default 40).
	TailLines int

	// StopTimeout is the SIGTERM→SIGKILL grace used when Start's ctx is
	// cancelled (default 10s). Explicit Stop calls pass their own.
	StopTimeout time.Duration
}

const (
	defaultTailLines   = 40
	defaultStopTimeout = 10 * time.Second

	// outputGrace bounds how long Done waits for the output pipes to reach
	// EOF after the group has been killed. Only a process that left the
	// group (setsid) while holding our pipes can keep them open that long.
	outputGrace = time.Second
)

// Process is a started child. All methods are safe for concurrent use.
type Process struct {
	pid int

	exited chan struct{} // the leader has exited (still unreaped or just reaped)
	done   chan struct{} // exited, output drained, exit code set

	exitCode int
	out      *output

	// mu orders group signals against reaping: once reaped is set the
	// leader's PID may belong to someone else, so nothing more is sent.
	mu     sync.Mutex
	reaped bool
	sent   uint64 // the signals Signal sent the group (bit N: signal N)

	stopOnce sync.Once
	stopErr  error
}

// exitCode maps a wait status to a shell-style code: the exit status, or
// 128+signal for a signal death (137 for SIGKILL), so it can be propagated
// as the launcher's own exit code.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// PID is the child's process ID, which is also its process group ID.
func (p *Process) PID() int { return p.pid }

// Done is closed once the child has exited and its output has been drained.
func (p *Process) Done() <-chan struct{} { return p.done }

// ExitCode is the child's exit status, 128+signal for a signal death, or -1
// before Done is closed.
func (p *Process) ExitCode() int {
	select {
	case <-p.done:
		return p.exitCode
	default:
		return -1
	}
}

// Tail returns up to Spec.TailLines of the most recent output lines, both
// streams interleaved in arrival order.
func (p *Process) Tail() []string { return p.out.tailLines() }

// Signal sends sig to the child's whole process group, so that an engine's
// worker processes see it too. It returns os.ErrProcessDone once the child
// has exited.
func (p *Process) Signal(sig os.Signal) error {
	ssig, ok := sig.(syscall.Signal)
	if !ok {
		return fmt.Errorf("supervise: unsupported signal %v", sig)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return os.ErrProcessDone
	}
	// Not reaped yet: the leader, alive or a zombie, still holds its PID, so
	// the group ID cannot have been reused by an unrelated process.
	if err := syscall.Kill(-p.pid, ssig); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return fmt.Errorf("supervise: signal %v to group %d: %w", sig, p.pid, err)
	}
	if ssig > 0 && ssig < 64 {
		p.sent |= 1 << ssig
	}
	return nil
}

// Sent reports whether Signal (Stop's SIGTERM and SIGKILL among its
// calls) sent sig to the group: a death by it was the launcher's doing,
// and one by another signal came from elsewhere.
func (p *Process) Sent(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return sig > 0 && sig < 64 && p.sent&(1<<sig) != 0
}

// Stop sends SIGTERM to the group, SIGKILL to the group if the leader is
// still running after timeout, and waits for Done. Whatever is left of the
// group when the leader exits is killed. It is idempotent; later and
// concurrent calls wait for the first one.
func (p *Process) Stop(timeout time.Duration) error {
	p.stopOnce.Do(func() {
		if err := p.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			p.stopErr = err
		}
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-p.exited:
		case <-t.C:
			if err := p.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
				p.stopErr = err
			}
		}
	})
	<-p.done
	return p.stopErr
}
