package sim

import (
	"context"
	"time"
)

// Clock is the sim's only source of time, so tests can replace real waiting
// with a fake clock that advances instantly and makes timings exact.
type Clock interface {
	Now() time.Time
	// Sleep waits for d, or until ctx is done, in which case it returns
	// ctx.Err(). A non-positive d returns at once (with ctx.Err()).
	Sleep(ctx context.Context, d time.Duration) error
}

// SystemClock is real time. Sleep parks on a timer: the sim must not
// busy-wait, because the bench measures on the same host.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
