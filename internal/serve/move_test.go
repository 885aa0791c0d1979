package serve

import (
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/config"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/testenv"
)

// A reload that moves the public address and needs a new engine binds the
// new address beside the old one; the move is kept only if the new engine
// took over, so a reload whose engine fails to start changes nothing,
// address included. Before, the proxy moved at once and stayed moved.
func TestMoveSettlesWithTheSwitch(t *testing.T) {
	at := func(port int) *plan.Plan {
		return &plan.Plan{Settings: config.Settings{
			Host: config.Field[string]{Value: "127.0.0.1"},
			Port: config.Field[int]{Value: port},
		}}
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	answers := func(p *plan.Plan) bool {
		c, err := net.DialTimeout("tcp", addrOf(p), 10*time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}
	for _, c := range []struct {
		name    string
		settle  func(old, moved, other *plan.Plan, pb *public)
		oldUp   bool // the address served before
		movedUp bool // the one the reload asked for
		serves  string
	}{
		{"the new engine took over", func(old, moved, _ *plan.Plan, pb *public) { pb.settle(moved, moved, discard) }, false, true, "moved"},
		{"the new engine failed: the old settings serve", func(old, moved, _ *plan.Plan, pb *public) { pb.settle(moved, old, discard) }, true, false, "old"},
		{"no engine serves", func(old, moved, _ *plan.Plan, pb *public) { pb.settle(moved, nil, discard) }, true, false, "old"},
		{"a switch that did not ask for the move", func(old, moved, _ *plan.Plan, pb *public) { pb.settle(old, old, discard) }, true, true, "old"},
		{"a later switch stays", func(old, moved, _ *plan.Plan, pb *public) { pb.drop() }, true, false, "old"},
		{"a later switch moves elsewhere", func(old, moved, other *plan.Plan, pb *public) {
			if err := pb.prepare(other, h, discard); err != nil {
				t.Fatal(err)
			}
		}, true, false, "old"},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := testenv.PortBlock(t, 3)
			old, moved, other := at(base), at(base+1), at(base+2)
			pb, err := listenPublic(old, h, discard)
			if err != nil {
				t.Fatal(err)
			}
			defer pb.close()
			if err := pb.prepare(moved, h, discard); err != nil {
				t.Fatal(err)
			}
			if !answers(old) || !answers(moved) {
				t.Fatalf("while the switch runs: old address answers %v, new %v; want both", answers(old), answers(moved))
			}
			c.settle(old, moved, other, pb)
			if got := answers(old); got != c.oldUp {
				t.Errorf("old address answers: %v, want %v", got, c.oldUp)
			}
			if got := answers(moved); got != c.movedUp {
				t.Errorf("new address answers: %v, want %v", got, c.movedUp)
			}
			want := map[string]*plan.Plan{"old": old, "moved": moved}[c.serves]
			if pb.addr != addrOf(want) {
				t.Errorf("the proxy's address is %s, want %s (%s)", pb.addr, addrOf(want), c.serves)
			}
		})
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
	pb, err := listenPublic(old, h, discard)
	if err != nil {
		t.Fatal(err)
	}
	defer pb.close()
	if err := pb.prepare(moved, h, discard); err != nil {
		t.Fatal(err)
	}
	sv := &launcher{pub: pb, log: discard, st: newServeStatus(old), force: inForce{}}
	sv.adopted(&server.Job{Plan: moved, Reason: "reload"})
	if pb.addr != addrOf(moved) || pb.pending != nil {
		t.Errorf("after the adopted move: serving %s, pending %v; want %s alone", pb.addr, pb.pending != nil, addrOf(moved))
	}
}
