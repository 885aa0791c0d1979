package serve

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/proxy"
)

// Past the cap a new connection takes a spare slot, reclaiming the spare
// that has waited longest for a request; past the spares too it reads 503,
// counted as a shed, and is closed. A closed connection gives its slot
// back, once however often it is closed.
func TestCappedListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl := newSlots(2)
	shed := make(chan int, 4)
	sl.shed = func(capacity int) { shed <- capacity }
	ln := &cappedListener{Listener: l, s: sl}
	defer ln.Close()
	accepted := make(chan net.Conn)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second)) // a bound on a broken cap, not a timing
		t.Cleanup(func() { c.Close() })
		return c
	}
	accept := func() *slotConn {
		t.Helper()
		select {
		case c := <-accepted:
			if c == nil {
				t.Fatal("the listener stopped")
			}
			return c.(*slotConn)
		case <-time.After(10 * time.Second): // a bound on a broken cap, not a timing
			t.Fatal("a connection was not handed out")
			return nil
		}
	}
	dial()
	first := accept()
	dial()
	accept()
	var spares []*slotConn
	var oldest net.Conn
	for i := range spareConns {
		c := dial()
		if i == 0 {
			oldest = c
		}
		sc := accept()
		sl.connState(sc, http.StateNew) // waiting for a request, as http.Server marks it
		spares = append(spares, sc)
	}
	dial()
	newest := accept()
	if newest.p != &sl.spare || newest.until.IsZero() {
		t.Fatalf("past the cap: pool %p, life until %v; want a spare slot with a life", newest.p, newest.until)
	}
	if _, err := oldest.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a full spare pool: its longest waiting connection read %v, want it closed (EOF) for the new one", err)
	}
	for _, sc := range append(spares[1:], newest) {
		sl.connState(sc, http.StateActive) // a request in
	}
	resp, err := http.ReadResponse(bufio.NewReader(dial()), nil)
	if err != nil {
		t.Fatalf("a connection past the cap and the spares: %v, want a 503", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !json.Valid(body) || !strings.Contains(string(body), `"type":"unavailable_error"`) {
		t.Errorf("past the cap: %d, Retry-After %q, %s; want 503, a Retry-After and the engines' error body", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if n := len(shed); n != 1 || <-shed != 2 {
		t.Errorf("%d sheds counted, want one, at cap 2", n)
	}
	first.Close()
	first.Close()
	dial()
	if c := accept(); c.p != &sl.main {
		t.Fatal("no slot given back by a closed connection")
	}
	if len(sl.main.ch) != 2 || len(sl.spare.ch) != spareConns {
		t.Errorf("%d slots held and %d spares, want 2 and %d (a double close gave back two)", len(sl.main.ch), len(sl.spare.ch), spareConns)
	}
}

// The cap leaves descriptors for engines and files under a low limit.
func TestCapFor(t *testing.T) {
	for _, c := range []struct{ nofile, want int }{
		{1 << 20, maxConns},
		{20000, maxConns},
		{4096, (4096 - connFDReserve) / 2},
		{1024, (1024 - connFDReserve) / 2},
		{256, minConns},
	} {
		if got := capFor(c.nofile); got != c.want {
			t.Errorf("capFor(%d) = %d, want %d", c.nofile, got, c.want)
		}
	}
}

// A header block past maxHeaderBytes is refused (431), so that a
// connection holds at most that much of one: 1,000 connections each
// trickling a 1 MB header took RSS to 1.9 GB with Go's default of 1 MiB.
func TestHeaderCap(t *testing.T) {
	srv, err := serveHTTP("127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), newSlots(4), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.shutdown(time.Second)
	for _, c := range []struct {
		size int
		want int
	}{{8 << 10, http.StatusOK}, {64 << 10, http.StatusRequestHeaderFieldsTooLarge}} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+srv.ln.Addr().String()+"/", nil)
		req.Header.Set("X-Big", strings.Repeat("a", c.size))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%d-byte header: %v", c.size, err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%d-byte header: %d, want %d", c.size, resp.StatusCode, c.want)
		}
	}
}

// The docs quote the memory the client connections may hold as
// maxConnsHeld computes it, one figure in one place. Before, they said
// the connections "each having sent a byte, hold 16 MiB" (the body
// budget's share) while 4,000 connections trickling 32 KiB headers took
// RSS from 25 MB to 319 MB.
func TestConnMemoryBoundQuoted(t *testing.T) {
	total, each := fmt.Sprintf("about %d MiB", maxConnsHeld>>20), fmt.Sprintf("%d KiB", connHeld>>10)
	for _, doc := range []string{"../../docs/serving.md", "../../docs/design/runtime.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(strings.Fields(string(b)), " ")
		for _, want := range []string{total, each, "maxConnsHeld"} {
			if want == "maxConnsHeld" && strings.HasSuffix(doc, "serving.md") {
				continue // the operators' page quotes the figures; the design names the code
			}
			if !strings.Contains(text, want) {
				t.Errorf("%s does not quote %q (maxConnsHeld, internal/serve/conns.go)", doc, want)
			}
		}
	}
}

// At the cap a new connection takes the slot of one that waits for a
// request (connected and silent here); only a cap full of requests in
// progress sheds (but for /health: TestHealthAtACapOfStalledBodies).
// Before, two silent connections held a cap of two, and /health read 503.
func TestCapReclaimsWaitingConnections(t *testing.T) {
	inHandler, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			inHandler <- struct{}{}
			<-release
		}
	})
	srv, err := serveHTTP("127.0.0.1:0", h, newSlots(2), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.shutdown(time.Second)
	defer close(release)
	addr := srv.ln.Addr().String()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second)) // a bound on a broken cap, not a timing
		t.Cleanup(func() { c.Close() })
		return c
	}
	closed := func(c net.Conn) bool {
		_, err := c.Read(make([]byte, 1))
		return err == io.EOF
	}
	// http.Server marks each accepted connection new before it accepts
	// the next, so the two wait in this order.
	silent1, silent2 := dial(), dial()
	for i, silent := range []net.Conn{silent1, silent2} {
		c := dial()
		c.Write([]byte("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"))
		select {
		case <-inHandler:
		case <-time.After(10 * time.Second): // a bound on a broken cap, not a timing
			t.Fatalf("request %d at a full cap never reached the handler", i+1)
		}
		if !closed(silent) {
			t.Fatalf("request %d at a full cap: silent connection %d still open, want it closed for the request", i+1, i+1)
		}
	}
	probe := dial()
	probe.Write([]byte("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"))
	resp, err := http.ReadResponse(bufio.NewReader(probe), nil)
	if err != nil {
		t.Fatalf("at a cap of requests in progress: %v, want a 503", err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("at a cap of requests in progress: %d, want 503", resp.StatusCode)
	}
}

// The waiting list is in the order connections began to wait: one kept
// alive after a reply waits from then, behind one accepted before it.
func TestWaitingOrder(t *testing.T) {
	sl := newSlots(3)
	conn := func() *slotConn {
		a, b := net.Pipe()
		t.Cleanup(func() { a.Close(); b.Close() })
		sl.main.ch <- struct{}{}
		return &slotConn{Conn: a, s: sl, p: &sl.main}
	}
	a, b, c := conn(), conn(), conn()
	sl.connState(a, http.StateNew)
	sl.connState(b, http.StateNew)
	sl.connState(c, http.StateNew)
	sl.connState(a, http.StateActive)
	sl.connState(a, http.StateIdle) // a's reply is out: it waits behind b and c
	sl.connState(c, http.StateActive)
	var got []string
	for sl.reclaim(&sl.main) {
		for name, x := range map[string]*slotConn{"a": a, "b": b, "c": c} {
			if x.closed && !slices.Contains(got, name) {
				got = append(got, name)
			}
		}
	}
	if want := []string{"b", "a"}; !slices.Equal(got, want) || len(sl.main.ch) != 1 {
		t.Errorf("reclaimed %v with %d slots left held, want b then a, and c (busy) holding 1", got, len(sl.main.ch))
	}
	sl.connState(b, http.StateIdle) // a closed connection never waits again
	if sl.reclaim(&sl.main) {
		t.Error("a closed connection was reclaimed again")
	}
}

// /health is answered at a cap full of requests whose bodies stall (a
// request in progress is never reclaimed), on a spare connection; any
// other request there reads the cap's 503, closes and is counted as a
// shed. Before, 32 stalled bodies at a cap of 32 shed every /health for
// their whole stall, and a liveness probe failed; the sheds were counted
// nowhere.
func TestHealthAtACapOfStalledBodies(t *testing.T) {
	inHandler := make(chan struct{}, 2)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" || r.URL.Path == "/metrics" || r.URL.Path == proxy.StatusPath {
			w.Write([]byte(`{"status":"ok"}`))
			return
		}
		inHandler <- struct{}{}
		io.ReadAll(r.Body) // stalls with the client's body: ends when it closes
	})
	sl := newSlots(2)
	shed := make(chan int, 4)
	sl.shed = func(capacity int) { shed <- capacity }
	dial := serveSlots(t, h, sl)
	for range 2 {
		dial().Write([]byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"prompt\":"))
		entered(t, inHandler)
	}
	ask := func(req string) (*http.Response, string) {
		t.Helper()
		c := dial()
		c.Write([]byte(req))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%q at a cap of stalled bodies: %v", req, err)
		}
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	// The status page and /metrics too: the pages the 503s are counted on
	// (a new-user pass found both 503 at a full cap).
	for _, p := range []string{"/health", proxy.StatusPath, "/metrics"} {
		for _, m := range []string{"GET", "HEAD"} {
			resp, _ := ask(m + " " + p + " HTTP/1.1\r\nHost: x\r\n\r\n")
			if resp.StatusCode != http.StatusOK || !resp.Close {
				t.Errorf("%s %s at a cap of stalled bodies: %d (close %v), want 200 and the connection closed", m, p, resp.StatusCode, resp.Close)
			}
		}
	}
	if len(shed) != 0 {
		t.Errorf("%d sheds counted for /health answered, want none", len(shed))
	}
	for _, req := range []string{"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", "POST /health HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"} {
		resp, body := ask(req)
		if resp.StatusCode != http.StatusServiceUnavailable || !resp.Close || resp.Header.Get("Retry-After") != "1" || body != shedBody {
			t.Errorf("%q on a spare connection: %d (close %v, Retry-After %q) %s; want the cap's 503, closed", req, resp.StatusCode, resp.Close, resp.Header.Get("Retry-After"), body)
		}
		if n := len(shed); n != 1 || <-shed != 2 {
			t.Errorf("%q: %d sheds counted, want one, at cap 2", req, n)
		}
	}
}

// A spare connection lives at most its life whatever deadline net/http or
// the proxy sets (none, or a renewed body's), and once /health is answered
// no stalled body behind it is read: before, Go read up to 256 KiB of it
// before closing, so a client announcing a body could hold a spare.
func TestSpareConnectionIsShort(t *testing.T) {
	until := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	c := &slotConn{until: until}
	for _, d := range []struct{ set, want time.Time }{
		{time.Time{}, until},
		{until.Add(time.Minute), until},
		{until.Add(-time.Second), until.Add(-time.Second)},
	} {
		if got := c.clamp(d.set); !got.Equal(d.want) {
			t.Errorf("a spare's deadline set to %v: %v, want %v", d.set, got, d.want)
		}
	}
	if main := (&slotConn{}).clamp(time.Time{}); !main.IsZero() {
		t.Errorf("a main connection's deadline cleared: %v, want none", main)
	}

	inHandler := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			inHandler <- struct{}{}
			io.ReadAll(r.Body)
		}
	})
	sl := newSlots(1)
	sl.life = time.Hour // so that only the cut after the answer can close it within the bound
	dial := serveSlots(t, h, sl)
	dial().Write([]byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"))
	entered(t, inHandler)
	probe := dial()
	probe.Write([]byte("GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"))
	br := bufio.NewReader(probe)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/health with a stalled body on a spare: %v %v, want 200", resp, err)
	}
	io.ReadAll(resp.Body)
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("after /health's answer, with its body stalled: %v, want the spare closed (EOF)", err)
	}
}

// entered waits for a request to reach the handler.
func entered(t *testing.T, in <-chan struct{}) {
	t.Helper()
	select {
	case <-in:
	case <-time.After(10 * time.Second): // a bound on a broken cap, not a timing
		t.Fatal("a request at a cap with room never reached the handler")
	}
}

// serveSlots serves h behind sl on a loopback port and returns a dialer
// whose connections carry a 10 s deadline: a bound on a broken cap or
// cut, not a timing.
func serveSlots(t *testing.T, h http.Handler, sl *slots) func() net.Conn {
	t.Helper()
	srv, err := serveHTTP("127.0.0.1:0", h, sl, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.shutdown(time.Second) }) // after the clients close (cleanups run last first)
	return func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", srv.ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		t.Cleanup(func() { c.Close() })
		return c
	}
}

// A connection net/http answers early with the client's request unread
// (a spare's 503 with a body left, a 431) gives its slot back when it is
// half-closed, before net/http's 500 ms wait for the close: the client
// reads the end at once and may connect again. Before, one client
// reconnecting at a spare's 503 in a loop held all the spares through
// those waits at a cap of stalled bodies, so /health read 503 for as long
// as it ran; a 431 held its cap slot the same way.
func TestAnsweredEarlyGivesItsSlotBack(t *testing.T) {
	inHandler := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" || r.URL.Path == "/other" {
			return
		}
		inHandler <- struct{}{}
		io.ReadAll(r.Body)
	})
	oneSpare := func(n int) *slots { // one spare: one connection in the wait holds them all
		sl := newSlots(n)
		sl.spare.ch = make(chan struct{}, 1)
		return sl
	}
	// ask sends req on c and reads the answer's status.
	ask := func(c net.Conn, req string) int {
		t.Helper()
		c.Write([]byte(req))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%.40q: %v", req, err)
		}
		io.ReadAll(resp.Body)
		return resp.StatusCode
	}
	// early sends req on c and reads its answer, then the end: net/http's
	// half-close (the client may connect again from here).
	early := func(c net.Conn, req string) int {
		t.Helper()
		code := ask(c, req)
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("%.40q answered %d: then %v, want the end (EOF)", req, code, err)
		}
		return code
	}

	dial := serveSlots(t, h, oneSpare(1))
	dial().Write([]byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"))
	entered(t, inHandler)
	big := "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n{" // over the 256 KiB Go reads of a body left
	if code := early(dial(), big); code != http.StatusServiceUnavailable {
		t.Fatalf("an upload on the spare: %d, want the cap's 503", code)
	}
	if code := ask(dial(), "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); code != http.StatusOK {
		t.Errorf("/health just after an upload's 503 on the spare: %d, want 200 (the spare given back)", code)
	}

	dial = serveSlots(t, h, oneSpare(1))
	if code := early(dial(), "GET /other HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 40<<10)+"\r\n\r\n"); code != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a 40 KiB header: %d, want 431", code)
	}
	if code := ask(dial(), "GET /other HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); code != http.StatusOK {
		t.Errorf("a request just after a 431 at a cap of one: %d, want 200 (the slot given back)", code)
	}
}

// slotPairs makes connected pairs on a loopback listener: the client's end
// and the server's, wrapped as a connection holding a main slot of sl.
func slotPairs(t *testing.T, sl *slots) func() (net.Conn, *slotConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return func() (net.Conn, *slotConn) {
		t.Helper()
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second)) // a bound on a broken close, not a timing
		t.Cleanup(func() { c.Close() })
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		sl.main.ch <- struct{}{}
		return c, &slotConn{Conn: s, s: sl, p: &sl.main}
	}
}

// The connections in net/http's wait before the close are bounded apart
// (lingerConns): with every place taken a half-closed connection is
// closed at once, its slot given back; one that finds a place keeps its
// socket open through the wait and gives the place back once, at its
// close.
func TestLingerIsBounded(t *testing.T) {
	sl := newSlots(2)
	pair := slotPairs(t, sl)
	for range lingerConns {
		sl.linger <- struct{}{}
	}
	_, full := pair()
	full.CloseWrite()
	if _, err := full.Conn.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("half-closed with every linger place taken: a write reads %v, want the socket closed at once", err)
	}
	full.Close()
	if len(sl.main.ch) != 0 || len(sl.linger) != lingerConns {
		t.Errorf("closed at once: %d slots and %d linger places held, want 0 and %d", len(sl.main.ch), len(sl.linger), lingerConns)
	}

	<-sl.linger
	client, waits := pair()
	waits.CloseWrite()
	if len(sl.main.ch) != 0 || len(sl.linger) != lingerConns {
		t.Errorf("in the wait: %d slots and %d linger places held, want 0 and %d", len(sl.main.ch), len(sl.linger), lingerConns)
	}
	if _, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("the client of a half-closed connection reads %v, want the end (EOF)", err)
	}
	client.Write([]byte("y"))
	if _, err := waits.Conn.Read(make([]byte, 1)); err != nil {
		t.Errorf("in the wait the socket reads %v, want it open", err)
	}
	waits.Close()
	waits.Close()
	if len(sl.linger) != lingerConns-1 {
		t.Errorf("after the close: %d linger places held, want %d (its own given back once)", len(sl.linger), lingerConns-1)
	}
}

// The connections answered early count until net/http closes them after
// its wait, lingering or closed at once; at maxAsleep the listener takes
// no new one (awake), so a flood's waits hold a bounded number of
// goroutines, not one per connection it opens in 500 ms.
func TestAsleepIsBounded(t *testing.T) {
	sl := newSlots(4)
	sl.maxSleep = 2
	pair := slotPairs(t, sl)
	conn := func() *slotConn { _, s := pair(); return s }
	for range lingerConns - 1 { // one linger place left: the second is closed at once
		sl.linger <- struct{}{}
	}
	a, b := conn(), conn()
	a.CloseWrite()
	if !sl.awake() {
		t.Fatalf("one of two asleep: not awake")
	}
	b.CloseWrite()
	b.CloseWrite() // net/http half-closes once; a second call counts once all the same
	if sl.awake() || sl.asleep.Load() != 2 {
		t.Fatalf("two of two asleep (one lingering, one closed at once): awake %v, asleep %d", sl.awake(), sl.asleep.Load())
	}
	b.Close()
	if !sl.awake() || sl.asleep.Load() != 1 {
		t.Fatalf("one closed after its wait: awake %v, asleep %d", sl.awake(), sl.asleep.Load())
	}
	a.Close()
	a.Close()
	if sl.asleep.Load() != 0 || len(sl.main.ch) != 0 {
		t.Errorf("all closed: asleep %d, slots %d, want 0 and 0", sl.asleep.Load(), len(sl.main.ch))
	}
}
