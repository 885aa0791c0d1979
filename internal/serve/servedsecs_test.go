package serve

import "testing"

// A scrape gives the controller the proxy's seconds and the engine's own
// within them; requests sent around the proxy give the engine's seconds
// and no wait.
func TestServedSecs(t *testing.T) {
	for _, c := range []struct {
		proxy, engine, secs, busy float64
	}{
		{50.9, 30, 50.9, 30},
		{0, 30, 30, 0},
		{12, 0, 12, 0},
	} {
		if secs, busy := servedSecs(c.proxy, c.engine); secs != c.secs || busy != c.busy {
			t.Errorf("servedSecs(%v, %v) = %v, %v; want %v, %v", c.proxy, c.engine, secs, busy, c.secs, c.busy)
		}
	}
}
