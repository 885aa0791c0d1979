// Package waitlogtest is a fake waitlog.Clock, for tests of the waits the
// launcher says: time moves only when the test advances it.
package waitlogtest

import (
	"slices"
	"sync"
	"time"

	"github.com/speclaunch/speclaunch/internal/waitlog"
)

// Clock is a fake clock; the zero value starts at the zero time.
type Clock struct {
	// Added, when set, hears of every timer made (a wait begun on another
	// goroutine: the test advances the clock once it is there).
	Added chan struct{}

	mu     sync.Mutex
	now    time.Time
	timers []*timer
}

type timer struct {
	c   *Clock
	at  time.Time
	f   func()
	off bool
}

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.off
	t.off = true
	return was
}

// Now is the fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc runs f when the clock is advanced past d from now.
func (c *Clock) AfterFunc(d time.Duration, f func()) waitlog.Timer {
	c.mu.Lock()
	t := &timer{c: c, at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	c.mu.Unlock()
	select {
	case c.Added <- struct{}{}:
	default: // none, or full: give it room for the timers a test awaits
	}
	return t
}

// Advance moves the clock by d, running every timer that comes due on the
// way, in order, each at its own time, on the caller's goroutine.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		c.timers = slices.DeleteFunc(c.timers, func(t *timer) bool { return t.off })
		var next *timer
		for _, t := range c.timers {
			if !t.at.After(end) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		if next == nil {
			c.now = end
			c.mu.Unlock()
			return
		}
		next.off = true
		c.now = next.at
		c.mu.Unlock()
		next.f()
	}
}
