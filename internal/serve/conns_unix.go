//go:build unix

package serve

import "golang.org/x/sys/unix"

// connCap is the cap on open client connections for this process:
// maxConns, or what its descriptor limit leaves room for.
func connCap() int {
	var r unix.Rlimit
	// Go raises the soft limit to the hard one at start. Past 2^30 the
	// limit is unlimited in effect (RLIM_INFINITY is 2^64-1).
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &r) != nil || r.Cur > 1<<30 {
		return maxConns
	}
	return capFor(int(r.Cur))
}
