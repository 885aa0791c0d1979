package proxy

import (
	"log/slog"
	"sync"
	"time"

	"github.com/speclaunch/speclaunch/internal/waitlog"
)

// burstEvery is how often one cause repeated request after request is
// logged: under a descriptor flood the load review counted 115 identical
// warnings in 15 s, one a request; a line every 10 s with the count of
// those it stands for keeps the log readable and the cause in view.
const burstEvery = 10 * time.Second

// burst decides which of a run of identical events is logged. An event
// held in a window is logged when the window ends, with the count of the
// others held with it, whether or not another event comes: a run may end
// at any event, and every event of it is in a line, logged or counted,
// without waiting on a next one that may never come.
type burst struct {
	mu     sync.Mutex
	said   bool      // a line was logged, at last (a fake clock's time may be zero)
	last   time.Time // when a line was last logged
	unsaid int       // events since then not logged
	held   []any     // the latest of them's attributes
	clock  waitlog.Clock
	log    *slog.Logger // where, and what, the run's lines say (warn's)
	msg    string
}

// note counts an event at now (log and msg its run's, kept for sayHeld
// under the one lock; attrs its line's) and says whether to log it now
// and how many before it went unlogged. flushIn, when not zero, is
// how long until its window ends: the first event held in a window asks
// for a flush there.
func (b *burst) note(now time.Time, log *slog.Logger, msg string, attrs []any) (say bool, unsaid int, flushIn time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log, b.msg = log, msg // what sayHeld says
	if b.said && now.Sub(b.last) < burstEvery {
		b.unsaid++
		b.held = attrs
		if b.unsaid == 1 {
			return false, 0, b.last.Add(burstEvery).Sub(now)
		}
		return false, 0, 0
	}
	unsaid, b.unsaid, b.held, b.last, b.said = b.unsaid, 0, nil, now, true
	return true, unsaid, 0
}

// flush ends a window at now: the latest held event's attributes and how
// many others were held with it; ok is false when there is none to log (a
// line since took their count) or the window has not ended.
func (b *burst) flush(now time.Time) (attrs []any, others int, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.unsaid == 0 || now.Sub(b.last) < burstEvery {
		return nil, 0, false
	}
	attrs, others = b.held, b.unsaid-1
	b.unsaid, b.held, b.last = 0, nil, now
	return attrs, others, true
}

// warn logs msg for one event of b's run: at once where its window
// allows, else at the window's end with the others held in it;
// more_since_last_line counts the events a line stands for besides its
// own.
func (b *burst) warn(log *slog.Logger, msg string, attrs ...any) {
	c := b.clock
	if c == nil {
		c = waitlog.Real
	}
	say, unsaid, flushIn := b.note(c.Now(), log, msg, attrs)
	if say {
		log.Warn(msg, append(attrs, "more_since_last_line", unsaid)...)
	}
	if flushIn > 0 {
		c.AfterFunc(flushIn, func() {
			if held, others, ok := b.flush(c.Now()); ok {
				log.Warn(msg, append(held, "more_since_last_line", others)...)
			}
		})
	}
}

// sayHeld logs the events held in the window under way now, with the
// count of the others, where its window's end would come too late: the
// proxy is done, and the process may exit before it.
func (b *burst) sayHeld() {
	b.mu.Lock()
	attrs, n, log, msg := b.held, b.unsaid, b.log, b.msg
	b.unsaid, b.held = 0, nil
	b.mu.Unlock()
	if n > 0 && log != nil {
		log.Warn(msg, append(attrs, "more_since_last_line", n-1)...)
	}
}
