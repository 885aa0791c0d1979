package proxy

import (
	"testing"
	"time"
)

// A run of one event is logged once per burstEvery, the line saying how
// many it stands for.
func TestBurst(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	var b burst
	for i, c := range []struct {
		at     time.Duration
		say    bool
		unsaid int
	}{
		{0, true, 0},
		{time.Second, false, 0},
		{5 * time.Second, false, 0},
		{burstEvery, true, 2},
		{burstEvery + time.Millisecond, false, 0},
		{3 * burstEvery, true, 1},
	} {
		say, unsaid := b.note(t0.Add(c.at))
		if say != c.say || unsaid != c.unsaid {
			t.Errorf("event %d at +%v: say %v unsaid %d, want %v %d", i, c.at, say, unsaid, c.say, c.unsaid)
		}
	}
}
