package serve

import (
	"fmt"
	"log/slog"
	"time"
)

// Issue 33: a profile edit took 23.8 s to switch with no line meanwhile.
// Any wait past waitQuiet is said, with what it waits for and its bound,
// and again every waitRepeat while it lasts.
const (
	waitQuiet  = 5 * time.Second
	waitRepeat = 30 * time.Second
)

// waitMessage is the line for a wait that has lasted elapsed; bound 0 =
// none of its own.
func waitMessage(what string, elapsed, bound time.Duration) string {
	msg := fmt.Sprintf("still waiting for %s (%s so far", what, elapsed.Round(time.Second))
	if bound > 0 {
		msg += fmt.Sprintf("; gives up after %s", bound)
	}
	return msg + ")"
}

// waitSay logs waitMessage after waitQuiet and every waitRepeat after
// that, until stop is called (stop waits for nothing: the timer's line is
// either out or never comes).
func waitSay(log *slog.Logger, what string, bound time.Duration) (stop func()) {
	start := time.Now()
	done := make(chan struct{})
	go func() {
		t := time.NewTimer(waitQuiet)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				log.Info(waitMessage(what, time.Since(start), bound))
				t.Reset(waitRepeat)
			}
		}
	}()
	return func() { close(done) }
}
