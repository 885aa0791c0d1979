// Package waitlog says a wait that lasts: issue 33 met a profile edit that
// took 23.8 s to switch with no line meanwhile. Every wait of the launcher
// that can outlast Quiet (an engine's load and width check, the probe
// before traffic, a drain, a shutdown's requests, an engine's stop) runs
// through Start: past Quiet it is logged with what it waits for and its
// bound, again every Repeat while it lasts, and its end once it was said.
// The timers come from a Clock, so tests run it on a fake one.
package waitlog

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Quiet is how long a wait may last unsaid (issue 33: "any wait over 5 s
// is logged"); Repeat how often a wait still under way is said again.
const (
	Quiet  = 5 * time.Second
	Repeat = 30 * time.Second
)

// Clock makes the timers of a wait.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a started timer; Stop as time.Timer's.
type Timer interface{ Stop() bool }

// Real is the wall clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Wait is one wait.
type Wait struct {
	// For is what it waits for, read each time it is said (a count of
	// requests changes): "3 requests to finish on engine 1".
	For func() string
	// Bound is the most it lasts (0: none of its own); Then what happens
	// at the bound (", then SIGKILL"), "" when nothing need be said.
	Bound time.Duration
	Then  string
}

// For is a Wait for a fixed what.
func For(what string, bound time.Duration, then string) Wait {
	return Wait{For: func() string { return what }, Bound: bound, Then: then}
}

// Message is the line for a wait under way for elapsed.
func Message(what string, elapsed, bound time.Duration, then string) string {
	msg := fmt.Sprintf("still waiting for %s (%s so far", what, elapsed.Round(time.Second))
	if bound > 0 {
		msg += "; up to " + bound.Round(100*time.Millisecond).String() + then
	}
	return msg + ")"
}

// Ended is the line for the end of a wait that was said.
func Ended(what string, elapsed time.Duration) string {
	return fmt.Sprintf("the wait for %s ended after %s", what, elapsed.Round(100*time.Millisecond))
}

// Start begins w: log hears of it past Quiet, every Repeat after, and of
// its end if it was said. end is safe to call more than once and from any
// goroutine; a line being written as end runs comes before the end's.
func Start(log *slog.Logger, c Clock, w Wait) (end func()) {
	if log == nil {
		return func() {}
	}
	if c == nil {
		c = Real
	}
	s := &said{log: log, c: c, w: w, began: c.Now()}
	s.mu.Lock()
	s.t = c.AfterFunc(Quiet, s.say)
	s.mu.Unlock()
	return s.end
}

type said struct {
	log   *slog.Logger
	c     Clock
	w     Wait
	began time.Time

	mu    sync.Mutex
	t     Timer
	what  string // as last said; "" when never said
	ended bool
}

func (s *said) say() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.what = s.w.For()
	s.log.Info(Message(s.what, s.c.Now().Sub(s.began), s.w.Bound, s.w.Then))
	s.t = s.c.AfterFunc(Repeat, s.say)
}

func (s *said) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended = true
	s.t.Stop()
	if s.what != "" {
		s.log.Info(Ended(s.what, s.c.Now().Sub(s.began)))
	}
}
