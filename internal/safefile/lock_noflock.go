//go:build !(darwin || dragonfly || freebsd || illumos || linux || netbsd || openbsd)

package safefile

import "os"

// tryLock: systems without flock run the update unguarded.
func tryLock(*os.File) (busy bool, err error) { return false, nil }
