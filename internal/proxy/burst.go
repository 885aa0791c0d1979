package proxy

import (
	"sync"
	"time"
)

// burstEvery is how often one cause repeated request after request is
// logged: under a descriptor flood the load review counted 115 identical
// warnings in 15 s, one a request; a line every 10 s with the count of
// those it stands for keeps the log readable and the cause in view.
const burstEvery = 10 * time.Second

// burst decides which of a run of identical events is logged.
type burst struct {
	mu     sync.Mutex
	last   time.Time // when one was last logged
	unsaid int       // events since then not logged
}

// note counts an event at now and says whether to log it, and how many
// before it went unlogged.
func (b *burst) note(now time.Time) (say bool, unsaid int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() && now.Sub(b.last) < burstEvery {
		b.unsaid++
		return false, 0
	}
	unsaid, b.unsaid, b.last = b.unsaid, 0, now
	return true, unsaid
}
