package proxy

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// A broken stream waits at most bodyCutGrace in all to learn its cause
// (docs/serving.md: up to half a second): the wait for the engine's mark
// and the wait for the Cut share one deadline. Before, a mark that came
// late left the Cut a whole grace again, up to twice it. The clock is
// synctest's: time moves only when every goroutine waits.
func TestWaitCutWithinOneGrace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mark   time.Duration // when the engine is marked gone; 0 = never
		last   bool          // no engine follows it (GoneLast)
		cutAt  time.Duration // when the proxy is closed (the Cut); 0 = never
		waited time.Duration
	}{
		{"never marked", 0, false, 0, bodyCutGrace},
		{"gone, another engine follows", 100 * time.Millisecond, false, 0, 100 * time.Millisecond},
		{"gone last, then cut", 100 * time.Millisecond, true, 300 * time.Millisecond, 300 * time.Millisecond},
		{"gone last late, no cut", 400 * time.Millisecond, true, 0, bodyCutGrace},
		{"gone last late, cut after the grace", 400 * time.Millisecond, true, 800 * time.Millisecond, bodyCutGrace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := New(Options{})
				b, err := NewBackend("http://127.0.0.1:1", "e")
				if err != nil {
					t.Fatal(err)
				}
				if tc.mark > 0 {
					time.AfterFunc(tc.mark, func() {
						if tc.last {
							b.GoneLast()
						} else {
							b.Gone()
						}
					})
				}
				if tc.cutAt > 0 {
					cut := time.AfterFunc(tc.cutAt, func() { p.Close(Cause{What: "test"}) })
					defer cut.Stop()
				}
				start := time.Now()
				p.waitCut(context.Background(), b, bodyCutGrace)
				if got := time.Since(start); got != tc.waited {
					t.Errorf("waited %s, want %s", got, tc.waited)
				}
			})
		})
	}
}
