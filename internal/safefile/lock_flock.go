//go:build darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd

package safefile

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes f's exclusive lock without waiting; busy says another
// holder has it.
func tryLock(f *os.File) (busy bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}
