//go:build linux

package engine

import (
	"os/exec"
	"syscall"
)

// ownGroup runs cmd in a process group of its own and makes its cancel
// (the bound, or speclaunch stopping) kill the whole group: a binary whose
// --help started children of its own and hung left them orphaned, past the
// bound and past speclaunch's own exit (a final user pass).
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// endGroup kills what is left of cmd's group once it has run: a --help
// that exits while a child it started runs on (a review) leaves no
// orphan either. The group's id stays taken while any member lives.
func endGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // ESRCH: nothing was left
	}
}
