//go:build unix

package safefile

import "syscall"

// openFlags makes the open itself return at once on a FIFO with no writer.
const openFlags = syscall.O_NONBLOCK
