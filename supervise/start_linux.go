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

	// Our own pipes rather than cmd.Stdout=io.Writer: os/exec would make
	// Wait block until every holder of the pipe (grandchildren included)
	// closed it, and we want to know the moment the leader exits so that the
	// rest of its group can be killed.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("supervise: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("supervise: %w", err)
	}
	cmd.Stdout = outW
	cmd.Stderr = errW

	p := &Process{
		exited: make(chan struct{}),
		done:   make(chan struct{}),
		out:    out,
	}

	started := make(chan error, 1)
	go func() {
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
	}()

	if err := <-started; err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		return nil, fmt.Errorf("supervise: start %q: %w", s.Argv[0], err)
	}
	// The child has its copies; ours must go so the readers see EOF.
	outW.Close()
	errW.Close()

	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); out.copy(outR, "stdout") }()
	go func() { defer readers.Done(); out.copy(errR, "stderr") }()

	go func() {
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
	}()

	if ctx.Done() != nil {
		stopTimeout := s.StopTimeout
		if stopTimeout <= 0 {
			stopTimeout = defaultStopTimeout
		}
		go func() {
			select {
			case <-ctx.Done():
				_ = p.Stop(stopTimeout)
			case <-p.done:
			}
		}()
	}
	return p, nil
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
