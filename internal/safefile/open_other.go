//go:build !unix

package safefile

// openFlags: systems without O_NONBLOCK rely on the Stat before the open.
const openFlags = 0
