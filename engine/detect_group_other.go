//go:build !linux

package engine

import "os/exec"

// ownGroup leaves cmd as it is where speclaunch does not supervise
// engines (start_other.go in internal/supervise): only its binary is
// inspected there, and the bound kills that.
func ownGroup(cmd *exec.Cmd) {}

// endGroup has no group to end here (ownGroup).
func endGroup(cmd *exec.Cmd) {}
