//go:build !unix

package serve

// connCap is maxConns where the descriptor limit is not read.
func connCap() int { return maxConns }
