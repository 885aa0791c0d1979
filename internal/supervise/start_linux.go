//go:build linux

package supervise

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Start starts the child described by s in its own process group.
//
// The child gets Pdeathsig=SIGKILL so that it dies if the launcher dies,
// even by SIGKILL, when no deferred cleanup can run. Linux sends the death
// signal when the *thread* that forked the child exits, not the process
// (prctl(2), golang/go#27505), and the Go runtime does destroy threads: a
// goroutine that exits while locked to its thread takes the thread with it.
// If the fork happened on such a thread, the engine would be killed at a
// random later moment. So the fork happens on a dedicated goroutine that
// locks its thread and stays locked until the child has been reaped; no other
// goroutine can run on that thread, so nothing can end it early.
//
// When the leader exits, for whatever reason, anything still left in its
// group (an engine's worker processes) is SIGKILLed: the group is the
// engine, and its leftovers would be orphans holding GPU memory.
//
// Cancelling ctx stops the child (SIGTERM, then SIGKILL after
// s.StopTimeout). A missing binary is an error naming what was looked up.
func Start(ctx context.Context, s Spec) (*Process, error) {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return nil, errors.New("supervise: empty command")
	}
	cmd := exec.Command(s.Argv[0], s.Argv[1:]...)
	if cmd.Err != nil {
		return nil, fmt.Errorf("supervise: start %q: %w", s.Argv[0], cmd.Err)
	}
	cmd.Env = s.Env
	cmd.Dir = s.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}

	tail := s.TailLines
	if tail <= 0 {
		tail = defaultTailLines
	}
	out := newOutput(s, tail)

	pp, err := openPipes()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = pp.outW
	cmd.Stderr = pp.errW

	p := &Process{
		exited: make(chan struct{}),
		done:   make(chan struct{}),
		out:    out,
	}
	started := make(chan error, 1)
	go p.runLeader(cmd, started)
	if err := <-started; err != nil {
		pp.closeAll()
		return nil, fmt.Errorf("supervise: start %q: %w", s.Argv[0], err)
	}
	// The child has its copies; ours must go so the readers see EOF.
	pp.outW.Close()
	pp.errW.Close()

	go p.drain(out, pp.outR, pp.errR)
	if ctx.Done() != nil {
		stopTimeout := s.StopTimeout
		if stopTimeout <= 0 {
			stopTimeout = defaultStopTimeout
		}
		go p.stopOnCancel(ctx, stopTimeout)
	}
	return p, nil
}

// pipes are the child's stdout and stderr. Our own pipes rather than
// cmd.Stdout=io.Writer: os/exec would make Wait block until every holder
// of the pipe (grandchildren included) closed it, and we want to know the
// moment the leader exits so that the rest of its group can be killed.
type pipes struct {
	outR, outW, errR, errW *os.File
}

// openPipes opens both pipes, or neither.
func openPipes() (pipes, error) {
	var pp pipes
	var err error
	if pp.outR, pp.outW, err = os.Pipe(); err != nil {
		return pipes{}, fmt.Errorf("supervise: %w", err)
	}
	if pp.errR, pp.errW, err = os.Pipe(); err != nil {
		pp.outR.Close()
		pp.outW.Close()
		return pipes{}, fmt.Errorf("supervise: %w", err)
	}
	return pp, nil
}

// closeAll closes every end, for a child that never started.
func (pp pipes) closeAll() {
	pp.outR.Close()
	pp.outW.Close()
	pp.errR.Close()
	pp.errW.Close()
}

// runLeader forks the child on a goroutine locked to its thread (see
// Start: the forking thread must outlive the child), reports the start on
// started, then waits for the leader, kills what is left of its group and
// reaps it.
func (p *Process) runLeader(cmd *exec.Cmd, started chan<- error) {
	runtime.LockOSThread() // see the doc comment: the forking thread must outlive the child
	if err := cmd.Start(); err != nil {
		runtime.UnlockOSThread()
		started <- err
		return
	}
	p.pid = cmd.Process.Pid
	started <- nil
	p.waitLeader()
	// The zombie still holds the PID, so the group ID cannot have been
	// reused: kill whatever is left of the engine's group before reaping.
	p.mu.Lock()
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	p.reaped = true
	p.mu.Unlock()
	_ = cmd.Wait() // exit status comes from ProcessState, not the error
	runtime.UnlockOSThread()
	p.exitCode = exitCode(cmd.ProcessState)
	close(p.exited)
}

// drain copies the child's output until both pipes close, and after the
// leader exits waits at most outputGrace for that before closing the read
// ends itself; then the process is done.
func (p *Process) drain(out *output, outR, errR *os.File) {
	var readers sync.WaitGroup
	readers.Add(2)
	out.open = 2 // before either reads: the last to end writes what raw output held
	go func() { defer readers.Done(); out.copy(outR, "stdout") }()
	go func() { defer readers.Done(); out.copy(errR, "stderr") }()

	<-p.exited
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	t := time.NewTimer(outputGrace)
	select {
	case <-drained:
	case <-t.C:
		// Someone outside the group holds the pipes; closing our read
		// ends unblocks the readers (os.Pipe files use the poller).
		outR.Close()
		errR.Close()
		<-drained
	}
	t.Stop()
	outR.Close()
	errR.Close()
	close(p.done)
}

// stopOnCancel stops the child when ctx is cancelled before it is done.
func (p *Process) stopOnCancel(ctx context.Context, stopTimeout time.Duration) {
	select {
	case <-ctx.Done():
		_ = p.Stop(stopTimeout)
	case <-p.done:
	}
}

// waitLeader blocks until the leader has exited without reaping it
// (waitid WNOWAIT), so its PID stays reserved while the group is killed.
func (p *Process) waitLeader() {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, p.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			return // on any other error cmd.Wait reports and reaps
		}
	}
}
