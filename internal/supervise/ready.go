package supervise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// ReadyCheck reports whether the child is ready to serve. Not-yet-ready is
// (false, detail, nil), where detail says why for the timeout message (e.g.
// "503 Loading model"). A non-nil error means checking can never succeed
// (a malformed URL) and ends WaitReady at once.
type ReadyCheck func(ctx context.Context) (ready bool, detail string, err error)

// ExitedError is returned by WaitReady when the child exits before it is
// ready, typically a bad flag or a missing model. Its message ends with the
// last output lines, since that is where the engine says what went wrong.
type ExitedError struct {
	Code int
	Tail []string
}

func (e *ExitedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "process exited with code %d while starting", e.Code)
	if len(e.Tail) > 0 {
		b.WriteString("; last output:")
		for _, l := range e.Tail {
			b.WriteString("\n  ")
			b.WriteString(l)
		}
	}
	return b.String()
}

// TimeoutError is returned by WaitReady when the child is still running but
// not ready after the timeout. LastDetail is what the last check said.
type TimeoutError struct {
	After      time.Duration
	LastDetail string
}

func (e *TimeoutError) Error() string {
	if e.LastDetail == "" {
		return fmt.Sprintf("not ready after %v", e.After)
	}
	return fmt.Sprintf("not ready after %v: last check: %s", e.After, e.LastDetail)
}

// WaitReady runs check every interval until it reports ready, the child
// exits (*ExitedError), timeout passes (*TimeoutError), or ctx ends
// (ctx.Err()). The first check runs at once. A check in flight is cancelled
// when the child exits or time runs out, so a hung endpoint cannot hold
// WaitReady past its timeout. The child is left running on timeout; the
// caller decides whether to Stop it.
func (p *Process) WaitReady(ctx context.Context, check ReadyCheck, timeout, interval time.Duration) error {
	if interval <= 0 {
		interval = 100 * time.Millisecond
	}
	dctx, dcancel := context.WithTimeout(ctx, timeout)
	defer dcancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()

	var last string
	for {
		actx, cancel := context.WithCancel(dctx)
		go func() {
			select {
			case <-p.exited:
				cancel()
			case <-actx.Done():
			}
		}()
		ready, detail, err := check(actx)
		cancel()
		if ready && err == nil {
			return nil
		}
		if detail != "" {
			last = detail
		}
		select {
		case <-p.exited:
			return p.exitedError()
		default:
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("readiness check: %w", err)
		}
		if dctx.Err() != nil {
			return &TimeoutError{After: timeout, LastDetail: last}
		}
		select {
		case <-p.exited:
			return p.exitedError()
		case <-dctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &TimeoutError{After: timeout, LastDetail: last}
		case <-tick.C:
		}
	}
}

func (p *Process) exitedError() error {
	<-p.done // the tail is complete only once output is drained
	return &ExitedError{Code: p.exitCode, Tail: p.Tail()}
}

// HTTPReady checks that GET url answers 200. While an engine loads, a
// refused connection and a 503 are normal; they and any other status are
// "not yet", with a detail such as "connection refused" or
// "503 Loading model" (the message of llama-server's JSON error body).
func HTTPReady(url string) ReadyCheck {
	client := &http.Client{Timeout: 5 * time.Second}
	return func(ctx context.Context) (bool, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, "", err
		}
		resp, err := client.Do(req)
		if err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				return false, "connection refused", nil
			}
			return false, err.Error(), nil
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		if resp.StatusCode == http.StatusOK {
			return true, "", nil
		}
		return false, statusDetail(resp.StatusCode, body), nil
	}
}

// statusDetail renders "503 Loading model" from llama-server's
// {"error":{"message":…}} body, or the first line of any other body.
func statusDetail(code int, body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := ""
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	} else {
		msg, _, _ = strings.Cut(strings.TrimSpace(string(body)), "\n")
		if len(msg) > 120 {
			msg = msg[:120] + "…"
		}
	}
	if msg == "" {
		msg = http.StatusText(code)
	}
	return fmt.Sprintf("%d %s", code, msg)
}

// Backoff computes restart delays for a child that keeps dying: Initial,
// doubling up to Max. A run that lasted at least Reset counts as healthy and
// starts the sequence again, so a crash days later restarts promptly. Zero
// fields mean Initial 500ms, Max 30s, Reset 1m. Not safe for concurrent use.
type Backoff struct {
	Initial, Max time.Duration
	Reset        time.Duration

	cur time.Duration
}

// Next returns the delay before the next restart of a child that ran for
// ranFor before it exited.
func (b *Backoff) Next(ranFor time.Duration) time.Duration {
	initial, maxD, reset := b.Initial, b.Max, b.Reset
	if initial <= 0 {
		initial = 500 * time.Millisecond
	}
	if maxD <= 0 {
		maxD = 30 * time.Second
	}
	if maxD < initial {
		maxD = initial
	}
	if reset <= 0 {
		reset = time.Minute
	}
	switch {
	case ranFor >= reset || b.cur == 0:
		b.cur = initial
	default:
		b.cur = min(b.cur*2, maxD)
	}
	return b.cur
}
