package serve

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

// A reload that moves the public address is bound ahead beside the old
// one, and the proxy moves once that reload's plan is in force: a reload
// whose engine fails changes nothing, address included, and a move a later
// reload still asks for survives an earlier one's failure. Before, the
// proxy moved at once and stayed moved; then, a first version of this kept
// the move by address and lost a queued reload's.
func TestPublicFollowsThePlanInForce(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	answers := func(p *plan.Plan) bool {
		c, err := net.DialTimeout("tcp", addrOf(p), 10*time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	type plans struct{ old, oldAgain, moved, moved2, movedAll, other, allIfaces *plan.Plan }
	for _, c := range []struct {
		name     string
		steps    func(t *testing.T, p plans, pb *public)
		up, down []string // addresses that answer, and that do not
		serves   string
	}{
		{"the new engine took over", func(t *testing.T, p plans, pb *public) {
			must(t, pb.reserve(p.moved))
			pb.follow(p.moved, p.moved)
		}, []string{"moved"}, []string{"old"}, "moved"},
		{"the new engine failed: the old settings serve", func(t *testing.T, p plans, pb *public) {
			must(t, pb.reserve(p.moved))
			pb.follow(p.old, p.moved)
		}, []string{"old"}, []string{"moved"}, "old"},
		{"an earlier switch ends while the move is asked for", func(t *testing.T, p plans, pb *public) {
			must(t, pb.reserve(p.moved))
			pb.follow(p.old, p.other)
		}, []string{"old", "moved"}, nil, "old"},
		{"a later reload stays", func(t *testing.T, p plans, pb *public) {
			must(t, pb.reserve(p.moved))
			must(t, pb.reserve(p.old))
		}, []string{"old"}, []string{"moved"}, "old"},
		{"a later reload moves elsewhere", func(t *testing.T, p plans, pb *public) {
			must(t, pb.reserve(p.moved))
			must(t, pb.reserve(p.other))
		}, []string{"old", "other"}, []string{"moved"}, "old"},
		{"a queued reload to the same address outlives the first's failure", func(t *testing.T, p plans, pb *public) {
			must(t, pb.reserve(p.moved))
			must(t, pb.reserve(p.moved2))
			pb.follow(p.old, p.moved) // the first failed
			pb.follow(p.moved2, p.moved2)
		}, []string{"moved"}, []string{"old"}, "moved"},
		{"the first moves, the queued one to elsewhere fails", func(t *testing.T, p plans, pb *public) {
			must(t, pb.reserve(p.moved))
			must(t, pb.reserve(p.other))
			pb.follow(p.moved, p.moved) // in force, its address bound then
			pb.follow(p.moved, p.other) // failed
		}, []string{"moved"}, []string{"old", "other"}, "moved"},
		{"a port move, then a host move on its port queued behind it", func(t *testing.T, p plans, pb *public) {
			must(t, pb.reserve(p.moved))
			must(t, pb.reserve(p.movedAll))
			pb.follow(p.moved, p.moved) // the later plan's listener held the port
			if got := pb.address(); got != addrOf(p.moved) {
				t.Errorf("with the first move in force the proxy listens on %s, want %s", got, addrOf(p.moved))
			}
			pb.follow(p.movedAll, p.movedAll)
		}, []string{"movedAll"}, []string{"old"}, "movedAll"},
		{"a port move, then back to the port in force before it serves", func(t *testing.T, p plans, pb *public) {
			must(t, pb.reserve(p.moved))
			must(t, pb.reserve(p.oldAgain))
			pb.follow(p.moved, p.moved)
			if !answers(p.old) {
				t.Error("the port the latest reload asks for refused connections while that reload's switch ran")
			}
			pb.follow(p.oldAgain, p.oldAgain)
		}, []string{"old"}, []string{"moved"}, "old"},
		{"a host move on one port whose engine fails", func(t *testing.T, p plans, pb *public) {
			must(t, pb.reserve(p.allIfaces))
			pb.follow(p.old, p.allIfaces)
		}, []string{"old"}, nil, "old"},
		// A rejected reload drops the one that waited (withdraw): before,
		// the address bound ahead for it stayed open until the next
		// reload taken.
		{"a waiting move withdrawn", func(t *testing.T, p plans, pb *public) {
			must(t, pb.reserve(p.oldAgain)) // under way, on the address in force
			must(t, pb.reserve(p.moved))
			pb.withdraw(p.old, p.moved, p.oldAgain)
			pb.follow(p.oldAgain, p.oldAgain)
		}, []string{"old"}, []string{"moved"}, "old"},
		{"a waiting move withdrawn, nothing under way", func(t *testing.T, p plans, pb *public) {
			must(t, pb.reserve(p.moved))
			pb.withdraw(p.old, p.moved, nil)
		}, []string{"old"}, []string{"moved"}, "old"},
		{"a waiting reload withdrawn, the move under way to its address kept", func(t *testing.T, p plans, pb *public) {
			must(t, pb.reserve(p.moved))
			must(t, pb.reserve(p.moved2))
			pb.withdraw(p.old, p.moved2, p.moved)
			if !answers(p.moved) {
				t.Error("the address the switch under way asks for was closed with the withdrawn reload's")
			}
			pb.follow(p.moved, p.moved)
		}, []string{"moved"}, []string{"old"}, "moved"},
		{"a waiting move withdrawn, the move under way elsewhere", func(t *testing.T, p plans, pb *public) {
			must(t, pb.reserve(p.moved))
			must(t, pb.reserve(p.other))
			pb.withdraw(p.old, p.other, p.moved)
			if answers(p.other) {
				t.Error("the withdrawn reload's address still answers")
			}
			pb.follow(p.moved, p.moved)
		}, []string{"moved"}, []string{"old", "other"}, "moved"},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := testenv.PortBlock(t, 3)
			at := func(host string, port int) *plan.Plan {
				return &plan.Plan{Settings: config.Settings{Host: config.Field[string]{Value: host}, Port: config.Field[int]{Value: port}}}
			}
			p := plans{old: at("127.0.0.1", base), oldAgain: at("127.0.0.1", base), moved: at("127.0.0.1", base+1), moved2: at("127.0.0.1", base+1),
				movedAll: at("0.0.0.0", base+1), other: at("127.0.0.1", base+2), allIfaces: at("0.0.0.0", base)}
			named := map[string]*plan.Plan{"old": p.old, "moved": p.moved, "movedAll": p.movedAll, "other": p.other}
			pb, err := listenPublic(p.old, h, nil, discard)
			if err != nil {
				t.Fatal(err)
			}
			defer pb.close()
			c.steps(t, p, pb)
			for _, n := range c.up {
				if !answers(named[n]) {
					t.Errorf("%s (%s) does not answer", n, addrOf(named[n]))
				}
			}
			for _, n := range c.down {
				if answers(named[n]) {
					t.Errorf("%s (%s) still answers", n, addrOf(named[n]))
				}
			}
			if got := pb.address(); got != addrOf(named[c.serves]) {
				t.Errorf("the proxy's address is %s, want %s (%s)", got, addrOf(named[c.serves]), c.serves)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var discard = slog.New(slog.DiscardHandler)

// A job that moves the address and finds its engine already serving (a
// switch queued before it started that engine) is adopted, not switched:
// the move is kept then too. Before, only a switch settled it, and the new
// address served beside the old one for good.
func TestAdoptedMoveSettles(t *testing.T) {
	ports := testenv.PortBlock(t, 2)
	old := &plan.Plan{Settings: config.Settings{Host: config.Field[string]{Value: "127.0.0.1"}, Port: config.Field[int]{Value: ports}}}
	moved := &plan.Plan{Settings: config.Settings{Host: config.Field[string]{Value: "127.0.0.1"}, Port: config.Field[int]{Value: ports + 1}}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	pb, err := listenPublic(old, h, nil, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer pb.close()
	must(t, pb.reserve(moved))
	sv := &launcher{pub: pb, log: discard, st: newServeStatus(old), force: inForce{}}
	sv.adopted(&server.Job{Plan: moved, Reason: "reload"})
	if pb.address() != addrOf(moved) || pb.pending != nil {
		t.Errorf("after the adopted move: serving %s, pending %v; want %s alone", pb.address(), pb.pending != nil, addrOf(moved))
	}
}

// A request open on the old address when the proxy moves finishes there:
// the old listener only stops accepting. Before, it was closed 30 s after
// the move, a stream with it.
func TestMoveLetsOpenRequestsFinish(t *testing.T) {
	base := testenv.PortBlock(t, 2)
	old := &plan.Plan{Settings: config.Settings{Host: config.Field[string]{Value: "127.0.0.1"}, Port: config.Field[int]{Value: base}}}
	moved := &plan.Plan{Settings: config.Settings{Host: config.Field[string]{Value: "127.0.0.1"}, Port: config.Field[int]{Value: base + 1}}}
	inHandler, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("first "))
		w.(http.Flusher).Flush()
		inHandler <- struct{}{}
		<-release
		w.Write([]byte("last"))
	})
	pb, err := listenPublic(old, h, nil, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer pb.close()
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + addrOf(old) + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- fmt.Sprintf("%s %v", b, err)
	}()
	<-inHandler
	graceful := make(chan struct{})
	var once sync.Once
	pb.srv.srv.RegisterOnShutdown(func() { once.Do(func() { close(graceful) }) })
	must(t, pb.reserve(moved))
	pb.follow(moved, moved)
	select {
	case <-graceful: // the old server waits for its open requests
	case <-time.After(10 * time.Second): // the test's own bound
		t.Fatal("the old listener was not shut down gracefully")
	}
	close(release)
	if g := <-got; g != "first last <nil>" {
		t.Errorf("the request open across the move read %q, want it whole", g)
	}
}

// A reload that changes the host is bound ahead as a port change is: an
// address this host cannot listen on is refused before anything switches,
// and the proxy stays where it listens, asking for nothing. Only where the
// listener in force holds the port (every interface on it) does the move
// wait for the switch's end. Before, a host change on the port in force
// bound nothing, the switch went through, and the proxy's move failed
// after it, logged alone, while the reload read applied.
func TestReserveBindsAHostChange(t *testing.T) {
	if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Skipf("this host cannot listen on 127.0.0.2 (%v)", err)
	} else {
		ln.Close()
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for _, c := range []struct {
		name    string
		host    string
		held    bool   // another process listens on host at the port in force
		refused string // in the error; "" when reserve takes it
		pending bool   // bound ahead
	}{
		{"another address of this host binds beside the old", "127.0.0.2", false, "", true},
		{"every interface on the port in force waits for the switch's end", "0.0.0.0", false, "", false},
		{"an address not this host's is refused", "192.0.2.1", false, "the proxy stays on", false},
		{"a name that does not resolve is refused", "nonexistent-host.invalid", false, "the proxy stays on", false},
		{"another process on that host and port is refused", "127.0.0.2", true, "stop what holds it", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			port := testenv.Port(t)
			at := func(host string) *plan.Plan {
				return &plan.Plan{Settings: config.Settings{Host: config.Field[string]{Value: host}, Port: config.Field[int]{Value: port}}}
			}
			old, moved := at("127.0.0.1"), at(c.host)
			if c.held {
				ln, err := net.Listen("tcp", addrOf(moved))
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
			}
			pb, err := listenPublic(old, h, nil, discard)
			if err != nil {
				t.Fatal(err)
			}
			defer pb.close()
			err = pb.reserve(moved)
			switch {
			case c.refused == "" && err != nil:
				t.Fatalf("reserve refused %s: %v", addrOf(moved), err)
			case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
				t.Fatalf("reserve of %s: error %v, want one saying %q", addrOf(moved), err, c.refused)
			}
			if (pb.pending != nil) != c.pending {
				t.Errorf("bound ahead: %v, want %v", pb.pending != nil, c.pending)
			}
			if wants := pb.want == moved; wants != (err == nil) {
				t.Errorf("the move is asked for: %v, with reserve's error %v", wants, err)
			}
			if err != nil {
				pb.follow(old, nil) // the switch was never asked for: nothing moves
				if pb.address() != addrOf(old) {
					t.Errorf("after a refused move the proxy listens on %s, want %s", pb.address(), addrOf(old))
				}
				return
			}
			pb.follow(moved, moved)
			if pb.address() != addrOf(moved) {
				t.Errorf("after the switch the proxy listens on %s, want %s", pb.address(), addrOf(moved))
			}
		})
	}
}

// ownPort: the proxy's own listener can hold an address's port only where
// the hosts overlap.
func TestOwnPort(t *testing.T) {
	for _, c := range []struct {
		addr, held string
		want       bool
	}{
		{"0.0.0.0:80", "127.0.0.1:80", true},
		{"127.0.0.1:80", "0.0.0.0:80", true},
		{"[::]:80", "127.0.0.1:80", true},
		{":80", "127.0.0.1:80", true},
		{"localhost:80", "127.0.0.1:80", true}, // a name may be the other
		{"127.0.0.1:80", "127.0.0.1:80", true},
		{"127.0.0.2:80", "127.0.0.1:80", false},
		{"192.0.2.1:80", "127.0.0.1:80", false},
		{"[::1]:80", "127.0.0.1:80", false},
		{"0.0.0.0:81", "127.0.0.1:80", false},
		{"bad", "127.0.0.1:80", false},
	} {
		if got := ownPort(c.addr, c.held); got != c.want {
			t.Errorf("ownPort(%q, %q) = %v, want %v", c.addr, c.held, got, c.want)
		}
	}
}

// A one-port move whose port another process holds for an instant, after
// the listener in force gave it up, binds it once it is free; where the new
// address stays taken, the old one is taken back, also after an instant
// taken (a CI run lost both at once, and the proxy listened nowhere).
func TestOnePortMoveOutlastsAnInstantsHolder(t *testing.T) {
	for _, c := range []struct {
		name             string
		busyNew, busyOld int    // binds that fail after the listener in force closed, of each address
		wantAddr         string // where the proxy ends: "new" or "old"
	}{
		{"the new address free on its third try", 2, 0, "new"},
		{"the new address taken: the old one back", 1000, 0, "old"},
		{"the old one back on its fourth try", 1000, 3, "old"},
	} {
		t.Run(c.name, func(t *testing.T) {
			port := testenv.Port(t)
			oldAddr, newAddr := fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("0.0.0.0:%d", port)
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
			sl := newSlots(connCap())
			srv, err := serveHTTP(oldAddr, h, sl, log)
			if err != nil {
				t.Fatal(err)
			}
			pb := &public{h: h, log: log, addr: oldAddr, srv: srv, slots: sl}
			defer func() { pb.mu.Lock(); pb.srv.shutdown(time.Second); pb.mu.Unlock() }()
			calls := map[string]int{}
			pb.bind = func(addr string) (*httpServer, error) {
				calls[addr]++
				busy := map[string]int{newAddr: c.busyNew, oldAddr: c.busyOld}[addr]
				if addr == newAddr && calls[addr] == 1 {
					return serveHTTP(addr, h, sl, log) // the listener in force holds the port: in use
				}
				if n := calls[addr] - 1; addr == newAddr && n <= busy || addr == oldAddr && n < busy {
					return nil, fmt.Errorf("listen tcp %s: %w", addr, syscall.EADDRINUSE)
				}
				return serveHTTP(addr, h, sl, log)
			}
			pb.mu.Lock()
			err = pb.moveLocked(newAddr)
			got := pb.addr
			pb.mu.Unlock()
			want := map[string]string{"new": newAddr, "old": oldAddr}[c.wantAddr]
			if got != want || (c.wantAddr == "new") != (err == nil) {
				t.Fatalf("after the move the proxy is at %s (err %v), want %s", got, err, want)
			}
			conn, derr := net.DialTimeout("tcp", oldAddr, 10*time.Second) // 0.0.0.0 answers on loopback too
			if derr != nil {
				t.Fatalf("the proxy answers on no address: %v", derr)
			}
			conn.Close()
		})
	}
}
