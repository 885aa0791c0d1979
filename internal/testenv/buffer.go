package testenv

import (
	"bytes"
	"sync"
)

// Buffer is a log sink that a test reads while the code under test (an
// engine's stderr, a watcher's or a server's goroutine) writes to it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
