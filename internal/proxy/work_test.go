package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/testenv"
)

// The meter counts each ended request's seconds, capped to its share of
// the slots by the mean number in flight over its life.
func TestWorkMeterServed(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type span struct {
		from, to float64
		count    bool
	}
	for _, tc := range []struct {
		name  string
		reqs  []span
		slots int
		want  float64
	}{
		{"one request", []span{{0, 2, true}}, 4, 2},
		{"in flight: nothing yet", []span{{0, -1, true}}, 4, 0},
		{"moved to another engine: not counted", []span{{0, 3, false}, {0, 1, true}}, 4, 1},
		{"two side by side, one slot each", []span{{0, 2, true}, {0, 2, true}}, 2, 4},
		// four for two slots, the whole time: each waited half its life
		{"queued beyond the slots", []span{{0, 2, true}, {0, 2, true}, {0, 2, true}, {0, 2, true}}, 2, 4},
		{"slots unknown: every second", []span{{0, 2, true}, {0, 2, true}, {0, 2, true}, {0, 2, true}}, 0, 8},
		// each had the other beside it half its life: level 1.5, and one
		// slot: each counts 2 s / 1.5
		{"overlap in part, one slot", []span{{0, 2, true}, {1, 3, true}}, 1, 2 * 2 / 1.5},
		{"overlap in part, two slots", []span{{0, 2, true}, {1, 3, true}}, 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m workMeter
			type ev struct {
				t     float64
				begin bool
				i     int
			}
			var evs []ev
			for i, r := range tc.reqs {
				evs = append(evs, ev{r.from, true, i})
				if r.to >= 0 {
					evs = append(evs, ev{r.to, false, i})
				}
			}
			// in time order, begins before ends at the same time
			for i := range evs {
				for j := i + 1; j < len(evs); j++ {
					if evs[j].t < evs[i].t || evs[j].t == evs[i].t && evs[j].begin && !evs[i].begin {
						evs[i], evs[j] = evs[j], evs[i]
					}
				}
			}
			marks := make([]workMark, len(tc.reqs))
			for _, e := range evs {
				if e.begin {
					marks[e.i] = m.begin(at(e.t))
				} else {
					m.end(marks[e.i], at(e.t), tc.reqs[e.i].count)
				}
			}
			if got := m.served(tc.slots); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("served(%d) = %g, want %g", tc.slots, got, tc.want)
			}
		})
	}
}

// A zero mark (a request that was no work) ends nothing.
func TestWorkMeterZeroMark(t *testing.T) {
	var m workMeter
	m.begin(time.Unix(10, 0))
	m.end(workMark{}, time.Unix(20, 0), true)
	if m.n != 1 || m.served(0) != 0 || m.served(4) != 0 || m.ended != 0 {
		t.Errorf("n %d, served %g", m.n, m.served(0))
	}
}

// Through the proxy: a POST is counted from the moment it is handed to the
// engine to the end of its answer, a GET is not, and a request whose dial
// was refused counts on the engine that answered it only.
func TestServedSecondsThroughTheProxy(t *testing.T) {
	clock, tick := fakeClock()
	good := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		tick(3 * time.Second) // the engine takes 3 s of the fake clock
		fmt.Fprint(w, `{"content":"x"}`)
	})
	good.clock = clock
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	deadURL := "http://" + ln.Addr().String()
	ln.Close()
	dead, _ := NewBackend(deadURL, "dead")
	dead.clock = clock

	served := func(b *Backend) float64 { s, _ := b.Served(4); return s }
	p := New(Options{})
	p.Route(good)
	u := front(t, p)
	post := func() {
		resp, err := http.Post(u+"/completion", "application/json", strings.NewReader(`{"prompt":"a"}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	post()
	testenv.WaitFor(t, "the request counted out", func() bool { return good.InFlight() == 0 })
	if got := served(good); got != 3 {
		t.Fatalf("served %g s after one 3 s POST, want 3", got)
	}
	resp, err := http.Get(u + "/props")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	testenv.WaitFor(t, "the GET counted out", func() bool { return good.InFlight() == 0 })
	if got := served(good); got != 3 {
		t.Errorf("served %g s after a GET, want 3 still", got)
	}

	p.Route(dead)
	done := make(chan struct{})
	go func() { post(); close(done) }()
	testenv.WaitFor(t, "one request held", func() bool { return p.Stats().HeldNow == 1 })
	tick(time.Second) // held a second after the refused dial: no engine's work
	p.Route(good)
	<-done
	testenv.WaitFor(t, "the retried request counted out", func() bool { return good.InFlight() == 0 })
	if got, d := served(good), served(dead); got != 6 || d != 0 {
		t.Errorf("served %g s on the engine that answered (want 6), %g on the dead one (want 0)", got, d)
	}
	if _, n := good.Served(4); n != 2 {
		t.Errorf("%d requests ended on the engine that answered, want the 2 POSTs", n)
	}
	if _, n := dead.Served(4); n != 0 {
		t.Errorf("%d requests ended on the dead engine, want 0", n)
	}
}

// Only a generation that ended well counts: llama-server adds a request's
// cycles to /metrics only then. A POST that generates nothing (/tokenize),
// an error answer and a stream the client left count neither time nor a
// request; nor does a request whose dial was refused and that no engine
// took in time.
func TestServedCountsGenerationsThatEndedWell(t *testing.T) {
	clock, tick := fakeClock()
	release := make(chan struct{})
	eng := backend(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		tick(time.Second)
		switch r.Header.Get("X-Test") {
		case "error":
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"code":400}}`)
		case "stream":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
		default:
			fmt.Fprint(w, `{}`)
		}
	})
	eng.clock = clock
	p := New(Options{})
	p.Route(eng)
	u := front(t, p)
	send := func(path, test string) {
		req, _ := http.NewRequest("POST", u+path, strings.NewReader(`{"prompt":"a"}`))
		req.Header.Set("X-Test", test)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	send("/tokenize", "")
	send("/v1/chat/completions", "error")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", u+"/completion", strings.NewReader(`{"stream":true}`))
	req.Header.Set("X-Test", "stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	bufio.NewReader(resp.Body).ReadString('\n') // the first event, then the client leaves
	cancel()
	resp.Body.Close()
	testenv.WaitFor(t, "the requests counted out", func() bool { return eng.InFlight() == 0 })
	if secs, n := eng.Served(4); secs != 0 || n != 0 {
		t.Errorf("served %g s over %d requests, want none", secs, n)
	}
	send("/v1/chat/completions", "")
	testenv.WaitFor(t, "the good request counted out", func() bool { return eng.InFlight() == 0 })
	if secs, n := eng.Served(4); secs != 1 || n != 1 {
		t.Errorf("served %g s over %d requests, want 1 s over the one that ended well", secs, n)
	}
	close(release)

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	deadURL := "http://" + ln.Addr().String()
	ln.Close()
	dead, _ := NewBackend(deadURL, "dead")
	dead.clock = clock
	p2 := New(Options{HoldTimeout: 50 * time.Millisecond})
	p2.Route(dead)
	r2, err := http.Post(front(t, p2)+"/completion", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	r2.Body.Close()
	if r2.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d after the hold timeout, want 503", r2.StatusCode)
	}
	testenv.WaitFor(t, "the refused request counted out", func() bool { return dead.InFlight() == 0 })
	if secs, n := dead.Served(4); secs != 0 || n != 0 {
		t.Errorf("the dead engine served %g s over %d requests, want none", secs, n)
	}
}

// fakeClock is a clock for Backend.clock that moves only by tick.
func fakeClock() (clock func() time.Time, tick func(time.Duration)) {
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	return func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
}
