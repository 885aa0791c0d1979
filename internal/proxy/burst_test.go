package proxy

import (
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/testenv"
	"github.com/speclaunch/speclaunch/internal/waitlog/waitlogtest"
)

// A run of one event is logged once per burstEvery, the line saying how
// many others it stands for; the events held in a window are logged when
// it ends (flush), the latest with the count of the others, so that none
// goes uncounted when no event comes after them.
func TestBurst(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	const flush = true
	var b burst
	for i, c := range []struct {
		at      time.Duration
		flush   bool // a flush at, not an event
		say     bool // an event logged now, or a flush that logs
		unsaid  int  // the count the line carries
		flushIn time.Duration
	}{
		{0, !flush, true, 0, 0},
		{time.Second, !flush, false, 0, burstEvery - time.Second}, // the first held asks for a flush
		{5 * time.Second, !flush, false, 0, 0},
		{burstEvery, flush, true, 1, 0}, // the latest held, and one other
		{burstEvery + time.Millisecond, !flush, false, 0, burstEvery - time.Millisecond},
		{2*burstEvery - time.Millisecond, flush, false, 0, 0}, // early: its window has not ended
		{2 * burstEvery, flush, true, 0, 0},                   // the one held, alone
		{2*burstEvery + time.Second, flush, false, 0, 0},      // nothing held
		{3 * burstEvery, !flush, true, 0, 0},
		{3*burstEvery + time.Second, !flush, false, 0, burstEvery - time.Second},
		{5 * burstEvery, !flush, true, 1, 0},             // an event after the window took the count first
		{5*burstEvery + time.Second, flush, false, 0, 0}, // the late flush finds none held
	} {
		now := t0.Add(c.at)
		var say bool
		var unsaid int
		var flushIn time.Duration
		if c.flush {
			_, unsaid, say = b.flush(now)
		} else {
			say, unsaid, flushIn = b.note(now, nil, "", []any{"n", i})
		}
		if say != c.say || unsaid != c.unsaid || flushIn != c.flushIn {
			t.Errorf("step %d at +%v (flush %v): say %v unsaid %d flushIn %v, want %v %d %v", i, c.at, c.flush, say, unsaid, flushIn, c.say, c.unsaid, c.flushIn)
		}
	}
}

// Every event is counted in some line: a line stands for itself and its
// more_since_last_line. Two at once (two clients that stopped reading)
// made one line with more_since_last_line=0 before, the second lost.
func TestBurstLosesNoCount(t *testing.T) {
	for i, events := range [][]time.Duration{
		{0, 0},
		{0, time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second},
		{0, 9 * time.Second, 11 * time.Second, 12 * time.Second, 25 * time.Second},
		{0, 0}, // the rest: closed at once (sayHeld), then the windows end
		{0, time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second},
		{0, 9 * time.Second, 11 * time.Second, 12 * time.Second, 25 * time.Second},
	} {
		var log testenv.Buffer
		clock := &waitlogtest.Clock{}
		b := burst{clock: clock}
		l := slog.New(slog.NewTextHandler(&log, nil))
		at := time.Duration(0)
		for _, e := range events {
			clock.Advance(e - at)
			at = e
			b.warn(l, "a client stopped reading", "path", "/v1/completions")
		}
		counted := func() int {
			lines := regexp.MustCompile(`more_since_last_line=(\d+)`).FindAllStringSubmatch(log.String(), -1)
			n := len(lines)
			for _, m := range lines {
				k, _ := strconv.Atoi(m[1])
				n += k
			}
			return n
		}
		if i >= 3 {
			b.sayHeld() // the proxy is done: the process may exit before a window ends
			if got := counted(); got != len(events) {
				t.Errorf("events at %v, said at close: the lines count %d of %d:\n%s", events, got, len(events), log.String())
			}
		}
		clock.Advance(2 * burstEvery) // every window ends
		if got := counted(); got != len(events) {
			t.Errorf("events at %v: the lines count %d of %d:\n%s", events, got, len(events), log.String())
		}
	}
}

// A connection shed at serve's connection cap is a rejected request
// (rejected_total, speclaunch_requests_rejected_total) and logged in
// bursts: one line at once, the rest counted when the window ends and at
// SayHeld. Before, a cap full of stalled bodies shed every new client
// with no line and no count.
func TestShedConnCountedAndLogged(t *testing.T) {
	var log testenv.Buffer
	p := New(Options{Log: slog.New(slog.NewTextHandler(&log, nil))})
	clock := &waitlogtest.Clock{}
	p.shedConns.clock = clock
	for range 3 {
		p.ShedConn(32)
	}
	if got := p.Stats().RejectedTotal; got != 3 {
		t.Errorf("rejected_total %d after 3 connections shed, want 3", got)
	}
	lines := func() []string {
		return regexp.MustCompile(`(?m)^.*answered 503 and closed.*$`).FindAllString(log.String(), -1)
	}
	if l := lines(); len(l) != 1 || !regexp.MustCompile(`level=WARN .* cap=32 more_since_last_line=0`).MatchString(l[0]) {
		t.Fatalf("3 sheds at once: want one warn line with the cap, got:\n%s", log.String())
	}
	clock.Advance(burstEvery)
	if l := lines(); len(l) != 2 || !strings.Contains(l[1], "more_since_last_line=1") {
		t.Errorf("the window's end should log the 2 held, one line counting the other:\n%s", log.String())
	}
	p.ShedConn(32) // within the window the flush opened: held
	p.ShedConn(32)
	p.SayHeld()
	if l := lines(); len(l) != 3 || !strings.Contains(l[2], "more_since_last_line=1") {
		t.Errorf("SayHeld should log the 2 held in the window, one line counting the other:\n%s", log.String())
	}
}
