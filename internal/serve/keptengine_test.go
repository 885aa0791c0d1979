package serve

import (
	"bytes"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/instance"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/metrics"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/proxy"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/testenv"
	"github.com/speclaunch/speclaunch/internal/watch"
)

// A reload that keeps the engine says "nothing to do" only where the front
// address stays too; a moved port is what it does.
func TestKeptEngine(t *testing.T) {
	at := func(host string, port int) *plan.Plan {
		p := &plan.Plan{}
		p.Settings.Host.Value, p.Settings.Port.Value = host, port
		p.Resolution.Schedule = schedule.Flat(4, "default")
		return p
	}
	withSchedule := func(p *plan.Plan, text string) *plan.Plan {
		s, err := schedule.Parse(text, "profile")
		if err != nil {
			t.Fatal(err)
		}
		p.Resolution.Schedule = s
		return p
	}
	withQueue := func(p *plan.Plan, n int) *plan.Plan {
		p.Settings.QueueSize.Value = n
		return p
	}
	for _, c := range []struct {
		name    string
		cur, np *plan.Plan
		msg     string
		attrs   []any
	}{
		{"same address", at("127.0.0.1", 19301), at("127.0.0.1", 19301), "lead; nothing to do", nil},
		{"port moves", at("127.0.0.1", 19301), at("127.0.0.1", 19302), "lead; the front address moves", []any{"from", "127.0.0.1:19301", "to", "127.0.0.1:19302"}},
		{"host moves", at("127.0.0.1", 19301), at("0.0.0.0", 19301), "lead; the front address moves", []any{"from", "127.0.0.1:19301", "to", "0.0.0.0:19301"}},
		{"nothing in force yet", nil, at("127.0.0.1", 19301), "lead; nothing to do", nil},
		// An operator's pass: a schedule edited alone read "nothing to
		// do", and the edit looked ignored.
		{"the schedule changes", at("127.0.0.1", 19301), withSchedule(at("127.0.0.1", 19301), "1:3,2+:5"),
			"lead; the width schedule is now 1:3,2+:5 (was 1+:4)", nil},
		{"the proxy's limits change", at("127.0.0.1", 19301), withQueue(at("127.0.0.1", 19301), 7), "lead; the proxy's limits change", nil},
	} {
		msg, attrs := keptEngine("lead", c.cur, c.np)
		if msg != c.msg || !slices.Equal(attrs, c.attrs) {
			t.Errorf("%s: %q %v, want %q %v", c.name, msg, attrs, c.msg, c.attrs)
		}
	}
}

// A reload that keeps the engine and moves the front port to one that is
// taken is refused, and its log says only that: it said "engine command
// unchanged; nothing to do" and then that the new settings cannot start.
func TestReloadToATakenPortSaysOneThing(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ports := testenv.PortBlock(t, 2)
	taken, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(ports+1))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cur := llamaPlan(bin, []string{"-ngl", "99"}, nil)
	cur.Settings.Model.Value = ggufModel(t)
	cur.Settings.Proxy.Value, cur.Settings.Switch.Value = true, key.SwitchDrain
	cur.Settings.Host.Value, cur.Settings.Port.Value = "127.0.0.1", ports
	np := *cur
	np.Settings.Port.Value = ports + 1
	var log bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&log, nil))
	pb, err := listenPublic(cur, http.NotFoundHandler(), nil, lg)
	if err != nil {
		t.Fatal(err)
	}
	defer pb.close()
	sv := &launcher{c: Config{Loader: flagLoader{flagLoad{&np}}}, px: proxy.New(proxy.Options{}), pub: pb, force: inForce{plan: cur}, st: newServeStatus(cur), met: metrics.New(metrics.Sources{}), log: lg}
	changes, stop, done := make(chan watch.Change), make(chan struct{}), make(chan struct{})
	go func() { sv.feed(changes, nil, stop); close(done) }()
	testenv.Returns(t, "the first reload taken", func() { changes <- watch.Change{Path: "p.toml", Reason: watch.ReasonWrite} })
	testenv.Returns(t, "the second reload taken once the first is done", func() { changes <- watch.Change{Path: "p.toml", Reason: watch.ReasonWrite} })
	close(stop)
	testenv.Returns(t, "the reload loop's end", func() { <-done })
	l := log.String()
	if !strings.Contains(l, "new settings cannot start") || strings.Contains(l, "nothing to do") || strings.Contains(l, "moves") {
		t.Errorf("log:\n%s", l)
	}
}

// A reload that keeps the engine command says "nothing to do" only where
// an engine serves with nothing under way: during the first engine's
// start (SIGHUP in its load) it said "nothing to do", then the runtime
// that it waited for the start, then "nothing to do" again. The runtime
// here is not run: its Submit is buffered.
func TestReloadDuringTheFirstStartSaysOneThing(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		phase   server.Phase
		nothing bool
	}{{server.Starting, false}, {server.Serving, true}} {
		cur := llamaPlan(bin, []string{"-ngl", "99"}, nil)
		cur.Settings.Model.Value = ggufModel(t)
		cur.Settings.Switch.Value = key.SwitchDrain
		var log bytes.Buffer
		sv := &launcher{c: Config{Loader: flagLoader{flagLoad{cur}}}, rt: server.New(server.Options{}), force: inForce{plan: cur},
			st: newServeStatus(cur), met: metrics.New(metrics.Sources{}), log: slog.New(slog.NewTextHandler(&log, nil))}
		sv.force.setPhase(tc.phase)
		changes, stop, done := make(chan watch.Change), make(chan struct{}), make(chan struct{})
		go func() { sv.feed(changes, nil, stop); close(done) }()
		testenv.Returns(t, "the reload taken", func() { changes <- watch.Change{Reason: "SIGHUP"} })
		close(stop)
		testenv.Returns(t, "the reload loop's end", func() { <-done })
		if got := strings.Contains(log.String(), "nothing to do"); got != tc.nothing {
			t.Errorf("%s: said nothing to do %v, want %v; log:\n%s", tc.phase, got, tc.nothing, log.String())
		}
	}
}

// A reload that keeps the engine command with an engine serving says so
// once: the reload loop said "engine command unchanged; nothing to do",
// then the runtime's adoption of the same job "the engine asked for is
// the one now serving; nothing to do" (an operator's comment edit logged
// both). A job the reload loop did not say (one adopted after a switch)
// is still said.
func TestKeptReloadSaysNothingToDoOnce(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cur := llamaPlan(bin, []string{"-ngl", "99"}, nil)
	cur.Settings.Model.Value = ggufModel(t)
	cur.Settings.Switch.Value = key.SwitchDrain
	np := *cur
	var log bytes.Buffer
	sv := &launcher{c: Config{Loader: flagLoader{flagLoad{&np}}}, rt: server.New(server.Options{}), force: inForce{plan: cur},
		st: newServeStatus(cur), met: metrics.New(metrics.Sources{}), log: slog.New(slog.NewTextHandler(&log, nil))}
	sv.force.setPhase(server.Serving)
	sv.st.serving(&server.Instance{Plan: cur, Info: &instance.Engine{}})
	changes, stop, done := make(chan watch.Change), make(chan struct{}), make(chan struct{})
	go func() { sv.feed(changes, nil, stop); close(done) }()
	testenv.Returns(t, "the reload taken", func() { changes <- watch.Change{Path: "p.toml", Reason: watch.ReasonWrite} })
	// The runtime adopts the job before it replies (and a stop forgets
	// the reply): take it while the reload waits for its answer.
	var reply chan error
	testenv.WaitFor(t, "the kept reload submitted", func() bool {
		sv.keptSaid.Range(func(k, _ any) bool { reply = k.(chan error); return false })
		return reply != nil
	})
	sv.adopted(&server.Job{Kind: server.KindReload, Plan: &np, Reason: "reload: p.toml (write)", Reply: reply})
	close(stop)
	testenv.Returns(t, "the reload loop's end", func() { <-done })
	if n := strings.Count(log.String(), "nothing to do"); n != 1 {
		t.Errorf("said nothing to do %d times, want once; log:\n%s", n, log.String())
	}
	other := np
	log.Reset()
	sv.adopted(&server.Job{Kind: server.KindReload, Plan: &other, Reason: "reload: p.toml (write)", Reply: make(chan error, 1)})
	if !strings.Contains(log.String(), "the engine asked for is the one now serving; nothing to do") {
		t.Errorf("an adoption the reload loop did not say is not said; log:\n%s", log.String())
	}
}
