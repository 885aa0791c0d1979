package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/speclaunch/speclaunch/internal/plan"
)

// public is the proxy's listening side. Where it listens follows the plan
// in force (follow), never a plan still on its way: a switch that fails
// leaves the address as it was, and the status page names where the proxy
// listens. A plan with another address (port or host) is bound ahead,
// beside the address in force (reserve), so that an address this host
// cannot listen on rejects it before anything stops and clients may
// connect there as soon as it is asked for.
type public struct {
	h     http.Handler
	log   *slog.Logger
	slots *slots // client connections open, over every listener

	mu   sync.Mutex
	addr string // where the proxy listens for the plan in force
	srv  *httpServer
	// want is the latest plan submitted whose switch has not ended, and
	// pending the listener bound ahead for its address.
	want        *plan.Plan
	pendingAddr string
	pending     *httpServer
	// retiring are listeners moved from: closed to new connections, their
	// open ones finishing (a stream on the old address is never cut by
	// the move).
	retiring []*httpServer
	// bind listens at an address: serveHTTP, or a test's.
	bind func(addr string) (*httpServer, error)
}

// A one-port move closes the listener in force before it binds the port
// again, and a port just released can be held for an instant by another
// process probing it (a CI run: both the new address and the old one
// answered "address already in use", and the proxy no longer listened).
// So the move tries the new address moveTries times and the old one
// takeBackTries times, bindPause apart: at most 0.1 s and 1 s.
const (
	moveTries     = 5
	takeBackTries = 50
	bindPause     = 20 * time.Millisecond
)

// listen binds addr, tries times while it is in use (one-port moves).
func (pb *public) listen(addr string, tries int) (*httpServer, error) {
	bind := pb.bind
	if bind == nil {
		bind = func(addr string) (*httpServer, error) { return serveHTTP(addr, pb.h, pb.slots, pb.log) }
	}
	var err error
	for i := range tries {
		if i > 0 {
			time.Sleep(bindPause)
		}
		var srv *httpServer
		if srv, err = bind(addr); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			return srv, err
		}
	}
	return nil, err
}

func addrOf(p *plan.Plan) string {
	return net.JoinHostPort(p.Settings.Host.Value, strconv.Itoa(p.Settings.Port.Value))
}

// listenPublic listens at p's address; shed counts and logs a connection
// answered 503 at the connection cap (conns.go).
func listenPublic(p *plan.Plan, h http.Handler, shed func(capacity int), log *slog.Logger) (*public, error) {
	addr := addrOf(p)
	sl := newSlots(connCap())
	sl.shed = shed
	srv, err := serveHTTP(addr, h, sl, log)
	if err != nil {
		return nil, unavailable(p.Settings.Host.Value, p.Settings.Port.Value, err, "")
	}
	return &public{h: h, log: log, addr: addr, srv: srv, slots: sl}, nil
}

// address is where the proxy listens now.
func (pb *public) address() string {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	return pb.addr
}

// reserve takes np as the latest plan asked for. Its address, where it is
// not the one in force (another port, or another host), is bound now
// beside it: one that cannot be bound (a taken port, a host that does not
// resolve or is not this machine's) is refused, changing nothing. Only
// where the listener in force holds the port itself (0.0.0.0:P to
// 127.0.0.1:P: ownPort) does the move wait for follow.
func (pb *public) reserve(np *plan.Plan) error {
	addr := addrOf(np)
	pb.mu.Lock()
	defer pb.mu.Unlock()
	switch {
	case addr == pb.addr:
		pb.dropLocked("a later reload asks for the address in force")
	case pb.pending != nil && pb.pendingAddr == addr:
	default:
		if pb.pending != nil && samePort(addr, pb.pendingAddr) {
			pb.dropLocked("")
		}
		srv, err := serveHTTP(addr, pb.h, pb.slots, pb.log)
		if err != nil && errors.Is(err, syscall.EADDRINUSE) && ownPort(addr, pb.addr) {
			pb.dropLocked("a later reload asks for the port in force")
			break
		}
		if err != nil {
			return unavailable(np.Settings.Host.Value, np.Settings.Port.Value, err, "; the proxy stays on "+pb.addr)
		}
		pb.dropLocked("a later reload asked for another address")
		pb.pending, pb.pendingAddr = srv, addr
		pb.log.Info("proxy listens on the new address too until the new settings serve", "addr", addr, "old", pb.addr)
	}
	pb.want = np
	return nil
}

// follow moves the proxy to the address of the plan in force, once a
// switch (or a plan taken in without one) has ended; done is that
// switch's plan. An address bound ahead for a plan that did not take
// over, and that no later plan asks for, is closed.
func (pb *public) follow(inForce, done *plan.Plan) {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	if done != nil && done == pb.want {
		pb.want = nil
	}
	target := addrOf(inForce)
	if pb.want != nil && addrOf(pb.want) == pb.addr {
		// The latest plan asked for is back at the address in force: stay
		// (moving away would refuse it until that plan's switch ends).
		target = pb.addr
	}
	if target != pb.addr {
		if pb.pending != nil && pb.pendingAddr != target && samePort(pb.pendingAddr, target) {
			// A later plan's listener holds the port under another host:
			// that plan's own follow makes the one-port move.
			pb.dropLocked("the settings in force take its port")
		}
		if pb.pending != nil && pb.pendingAddr == target {
			pb.retireLocked(pb.srv)
			pb.srv, pb.addr, pb.pending, pb.pendingAddr = pb.pending, target, nil, ""
			pb.log.Info("proxy moved to a new address", "addr", target)
		} else if err := pb.moveLocked(target); err != nil {
			pb.log.Error("the proxy could not move to the address of the settings in force; it stays where it listens", "addr", pb.addr, "err", err)
		}
	}
	if pb.pending != nil && (pb.want == nil || addrOf(pb.want) != pb.pendingAddr) {
		pb.dropLocked("the settings that asked for it did not take over")
	}
}

// withdraw takes back dropped, a plan asked for that will not be switched
// to (a rejected reload withdrew it): the latest plan asked for is the
// switch still under way, under (nil when none), and the address bound
// ahead for dropped is closed unless under asks for it too; the proxy
// stays at the address of inForce. A move under asks for whose listener
// dropped's closed is bound when under's switch ends (follow).
func (pb *public) withdraw(inForce, dropped, under *plan.Plan) {
	pb.mu.Lock()
	if pb.want == dropped {
		pb.want = under
	}
	pb.mu.Unlock()
	pb.follow(inForce, nil)
}

// moveLocked moves the proxy to addr with no listener bound ahead: the new
// address is bound first, so a taken port leaves the old one serving.
// Where the listener in force holds the port (0.0.0.0:P to 127.0.0.1:P,
// or back), it stops accepting first and the new address is bound in its
// place; a connection arriving in between is refused, and if the new
// address cannot be bound the old one is taken back.
func (pb *public) moveLocked(addr string) error {
	old, oldAddr := pb.srv, pb.addr
	srv, err := pb.listen(addr, 1)
	if err != nil && errors.Is(err, syscall.EADDRINUSE) && ownPort(addr, oldAddr) {
		old.closeListener()
		if srv, err = pb.listen(addr, moveTries); err != nil {
			back, berr := pb.listen(oldAddr, takeBackTries)
			if berr != nil {
				return fmt.Errorf("%s is not available (%w), and the old address %s could not be taken back (%v): it no longer accepts connections; restart speclaunch", addr, err, oldAddr, berr)
			}
			pb.retireLocked(old)
			pb.srv = back
			return fmt.Errorf("%s is not available: %w", addr, err)
		}
	}
	if err != nil {
		return fmt.Errorf("%s is not available: %w", addr, err)
	}
	pb.retireLocked(old)
	pb.srv, pb.addr = srv, addr
	pb.log.Info("proxy moved to a new address", "addr", addr)
	return nil
}

// dropLocked closes the listener bound ahead, if any; why, when given, is
// logged.
func (pb *public) dropLocked(why string) {
	if pb.pending == nil {
		return
	}
	addr := pb.pendingAddr
	pb.retireLocked(pb.pending)
	pb.pending, pb.pendingAddr = nil, ""
	if why != "" { // said once it is closed: a client reading the line finds the port closed
		pb.log.Info("closed the address bound ahead: "+why, "addr", addr)
	}
}

// retireLocked stops s accepting now; its open connections finish, each
// request bounded by the proxy's own timeouts, and close (the stop) ends
// whatever is left.
func (pb *public) retireLocked(s *httpServer) {
	s.closeListener()
	pb.retiring = append(pb.retiring, s)
	go func() {
		s.srv.Shutdown(context.Background())
		pb.mu.Lock()
		pb.retiring = slices.DeleteFunc(pb.retiring, func(x *httpServer) bool { return x == s })
		pb.mu.Unlock()
	}()
}

// ownPort says whether the proxy's listener at held may be what keeps
// addr from being bound: one port, and hosts that overlap (either is every
// interface, or a name, which may resolve to the other). Two distinct
// addresses of this host bind one port side by side (127.0.0.1:P and
// 127.0.0.2:P), so a refusal there comes from another process.
func ownPort(addr, held string) bool {
	h1, p1, err1 := net.SplitHostPort(addr)
	h2, p2, err2 := net.SplitHostPort(held)
	if err1 != nil || err2 != nil || p1 != p2 {
		return false
	}
	ip1, ip2 := net.ParseIP(h1), net.ParseIP(h2)
	if ip1 == nil || ip2 == nil {
		return true
	}
	return ip1.IsUnspecified() || ip2.IsUnspecified() || ip1.Equal(ip2)
}

// samePort says whether two host:port addresses name one port.
func samePort(a, b string) bool {
	_, pa, err1 := net.SplitHostPort(a)
	_, pb, err2 := net.SplitHostPort(b)
	return err1 == nil && err2 == nil && pa == pb
}

func (pb *public) close() {
	pb.mu.Lock()
	servers := pb.servers()
	pb.mu.Unlock()
	for _, s := range servers {
		s.shutdown(2 * time.Second)
	}
}

// servers are every listener the proxy has open; pb.mu is held.
func (pb *public) servers() []*httpServer {
	out := append([]*httpServer{pb.srv}, pb.retiring...)
	if pb.pending != nil {
		out = append(out, pb.pending)
	}
	return out
}
