package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/speclaunch/speclaunch/cuda"
	"github.com/speclaunch/speclaunch/internal/control"
	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/modelhash"
	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/server"
)

// httpServer is one public listener of the proxy.
type httpServer struct {
	srv *http.Server
	ln  net.Listener
}

// serveHTTP listens at addr, the client connections open at once bounded
// by sl (conns.go).
func serveHTTP(addr string, h http.Handler, sl *slots, log *slog.Logger) (*httpServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	ln := &cappedListener{Listener: l, s: sl}
	s := &httpServer{ln: ln, srv: &http.Server{
		Handler:           sl.guard(h),
		ConnContext:       sl.connContext,
		ReadHeaderTimeout: headerTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		// A kept-alive connection with no request closes after two
		// minutes (issue 33: 100 idle or trickling connections stayed);
		// a request's body has the proxy's body timeout.
		IdleTimeout: 2 * time.Minute,
		ConnState:   sl.connState,
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *httpServer) closeListener() { s.ln.Close() }

func (s *httpServer) shutdown(grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if s.srv.Shutdown(ctx) != nil {
		s.srv.Close()
	}
}

// switchFacts is what the automatic switch mode decides from.
type switchFacts struct {
	Engine     key.Engine
	Mem        cuda.Memory
	MemErr     error
	EngineMiB  int64 // GPU memory the serving engine holds; 0 = unknown
	ModelBytes int64 // target + drafter files; 0 = unknown
}

// overlapHeadroom is the share of free memory kept spare when judging
// whether a second engine fits: KV cache and compute buffers vary a little
// between starts of the same command.
const overlapHeadroom = 1.10

// chooseSwitch picks the switch mode. Overlap needs room for a second copy
// of the engine beside the first; the best measure of "a copy" is what the
// serving engine holds on the GPU now (nvidia-smi's per-process figure,
// which includes KV cache), then the model files' size. Drain is the safe
// answer whenever that cannot be judged.
func chooseSwitch(mode key.Switch, f switchFacts) (key.Switch, string) {
	if mode == key.SwitchOverlap || mode == key.SwitchDrain {
		return mode, "server.switch = " + string(mode)
	}
	if f.Engine == key.Sim {
		return key.SwitchOverlap, "the sim engine holds no GPU memory"
	}
	if f.MemErr != nil {
		return key.SwitchDrain, fmt.Sprintf("GPU memory unknown (%v): drain is the safe choice", f.MemErr)
	}
	need, what := f.EngineMiB, "the serving engine holds"
	if need <= 0 {
		if f.ModelBytes <= 0 {
			return key.SwitchDrain, "neither the engine's GPU memory nor the model files' size is known: drain is the safe choice"
		}
		need, what = (f.ModelBytes+(1<<20)-1)>>20, "the model files take"
	}
	want := int64(float64(need) * overlapHeadroom)
	if f.Mem.FreeMiB >= want {
		return key.SwitchOverlap, fmt.Sprintf("a second engine fits: %s %d MiB, %d MiB free", what, need, f.Mem.FreeMiB)
	}
	return key.SwitchDrain, fmt.Sprintf("a second engine would not fit: %s %d MiB, %d MiB free", what, need, f.Mem.FreeMiB)
}

// switchFacts gathers the facts for chooseSwitch (nvidia-smi, file sizes).
func (sv *launcher) switchFacts(np *plan.Plan, cur *server.Instance) switchFacts {
	f := switchFacts{Engine: np.Settings.Engine.Value}
	if f.Engine == key.Sim {
		return f
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	f.Mem, f.MemErr = cuda.ProbeMemory(ctx, cuda.Options{})
	if f.MemErr == nil && cur != nil {
		f.EngineMiB = f.Mem.UsedByPID[cur.Proc.PID()]
	}
	f.ModelBytes = modelhash.Size(np.Settings.Model.Value) + modelhash.Size(np.Settings.DraftModel.Value)
	return f
}

// switchRecord is one switch, as /speclaunch/status shows it.
type switchRecord struct {
	At        time.Time `json:"at"`
	Kind      string    `json:"kind"` // start, reload, restart, adapt
	Reason    string    `json:"reason"`
	Mode      string    `json:"mode"` // overlap, drain, direct, restart
	FromWidth int       `json:"from_width,omitempty"`
	ToWidth   int       `json:"to_width,omitempty"`
	OK        bool      `json:"ok"`
	Error     string    `json:"error,omitempty"`
	// StartMS runs from the switch's start to the new engine serving (or
	// failing): the follower and the adaptive loop read it as the cost of
	// a switch (lastSwitch), so a wait before the start is WaitedMS.
	StartMS  float64 `json:"took_ms"`
	WaitedMS float64 `json:"waited_ms,omitempty"` // asked for while another switch ran: from the request to its start
	DrainMS  float64 `json:"drain_ms,omitempty"`  // drain: requests held while the old engine finished
}

// maxSwitchRecords bounds the status history.
const maxSwitchRecords = 100

// serveStatus is what /speclaunch/status reports.
type serveStatus struct {
	mu      sync.Mutex
	started time.Time
	public  string
	proxy   bool
	mode    key.Switch
	cur     *server.Instance
	// desc is the plan that describes cur: its own, or a reload's that
	// runs the very same engine (a schedule edit that left its width).
	desc     *plan.Plan
	switches []switchRecord
	total    int
	adapt    any           // the adaptive loop's latest state
	follow   *FollowStatus // the schedule follower's latest state
	// chosenFor is the plan of the follower's last switch, chosenAt the
	// mean load (requests in flight) that caused it, as follow.Decision
	// gives it (to a tenth: the figure the switch's log line says).
	chosenFor *plan.Plan
	chosenAt  float64
	// adaptW is the width of the adaptive controller's last switch,
	// adaptBucket the bucket of its learnt schedule that width serves and
	// adaptLoad the load that caused it.
	adaptW      int
	adaptBucket string
	adaptLoad   float64
	reload      *lastReload // nil before the first reload
	reloadSeq   uint64      // the number of the last reload begun (setReload)
}

func newServeStatus(p *plan.Plan) *serveStatus {
	return &serveStatus{started: time.Now(), proxy: p.Settings.Proxy.Value, mode: p.Settings.Switch.Value,
		public: addrOf(p)}
}

func (st *serveStatus) serving(in *server.Instance) {
	st.mu.Lock()
	st.cur, st.desc = in, in.Plan
	st.mu.Unlock()
}

// keptBy takes np, a reload's plan, as the description of the serving
// engine when np runs that very engine, carrying the follower's choice
// over to it; it returns that engine, nil when np needs another.
func (st *serveStatus) keptBy(np *plan.Plan) *server.Instance {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.cur == nil || !plan.SameEngine(st.cur.Plan, np) {
		return nil
	}
	if st.chosenFor != nil && st.chosenFor == st.desc {
		st.chosenFor = np
	}
	st.desc = np
	return st.cur
}

// serves says an engine serves (none after a crash, until its restart).
func (st *serveStatus) serves() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.cur != nil
}

func (st *serveStatus) exited(in *server.Instance, code int) {
	st.mu.Lock()
	if st.cur == in {
		st.cur, st.desc = nil, nil
	}
	st.mu.Unlock()
}

func (st *serveStatus) switched(r switchRecord) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.total++
	st.switches = append(st.switches, r)
	if len(st.switches) > maxSwitchRecords {
		st.switches = st.switches[len(st.switches)-maxSwitchRecords:]
	}
}

// switchCount is how many switches were recorded so far.
func (st *serveStatus) switchCount() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.total
}

// lastSwitch is the time the latest switch of kind took, when one was
// recorded after the count before (switchCount) and succeeded.
func (st *serveStatus) lastSwitch(kind string, before int) (time.Duration, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for i := len(st.switches) - 1; i >= 0 && i >= len(st.switches)-(st.total-before); i-- {
		if r := st.switches[i]; r.Kind == kind && r.OK {
			return time.Duration(r.StartMS * float64(time.Millisecond)), true
		}
	}
	return 0, false
}

// settings takes in a reload's settings that the status shows: the switch
// mode, and the public address in direct mode (behind the proxy, where it
// listens: setPublic).
func (st *serveStatus) settings(p *plan.Plan) {
	st.mu.Lock()
	st.mode = p.Settings.Switch.Value
	if !st.proxy {
		st.public = addrOf(p)
	}
	st.mu.Unlock()
}

// setPublic shows where the proxy listens.
func (st *serveStatus) setPublic(addr string) {
	st.mu.Lock()
	st.public = addr
	st.mu.Unlock()
}

// chosen records the load a follow switch to p was chosen for.
func (st *serveStatus) chosen(p *plan.Plan, load float64) {
	st.mu.Lock()
	st.chosenFor, st.chosenAt = p, load
	st.mu.Unlock()
}

// bucketInForce is the schedule's bucket a plan runs and the load it was
// chosen for: the mean load the follower measured for its switch, else
// the load the plan was built for (1 at a launch).
func (st *serveStatus) bucketInForce(p *plan.Plan) (string, float64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.bucketOf(p)
}

// chosenAdapt records the bucket of the learnt schedule and the load an
// adaptive switch to width w serves.
func (st *serveStatus) chosenAdapt(w int, bucket string, load float64) {
	st.mu.Lock()
	st.adaptW, st.adaptBucket, st.adaptLoad = w, bucket, load
	st.mu.Unlock()
}

// scheduleOf is the schedule in force for p, in text form: the adaptive
// controller's learnt one while its switch serves (the bucket bucketOf
// names is one of it), else the plan's. Under --adapt the status showed
// the plan's flat "1+:16" beside the learnt schedule's bucket "1".
func (st *serveStatus) scheduleOf(p *plan.Plan) string {
	if cs, ok := st.adapt.(control.Status); ok && cs.Schedule != "" && (st.adaptServes(p) || st.adaptKept(p)) {
		return cs.Schedule
	}
	return p.Resolution.Schedule.String()
}

// adaptKept says that the adaptive controller reads the load and keeps
// p's width at its bucket in force, though no switch of its started p
// (the launch's engine at the default): its bucket and load are the
// ones in force, not the plan's "1+" at load 1, which read so under four
// clients for a whole run.
func (st *serveStatus) adaptKept(p *plan.Plan) bool {
	cs, ok := st.adapt.(control.Status)
	return ok && cs.Bucket != "" && cs.Width == widthOf(p)
}

// adaptServes says that p is the adaptive controller's last switch, so
// that its learnt schedule's bucket is the one in force.
func (st *serveStatus) adaptServes(p *plan.Plan) bool {
	return p.Resolution.IsAdaptive() && st.adaptBucket != "" && st.adaptW == widthOf(p)
}

func (st *serveStatus) bucketOf(p *plan.Plan) (string, float64) {
	r := p.Resolution
	if st.adaptServes(p) {
		return st.adaptBucket, st.adaptLoad // the learnt schedule's bucket in force
	}
	if st.adaptKept(p) {
		cs := st.adapt.(control.Status)
		return cs.Bucket, cs.Load
	}
	if len(r.Schedule) == 0 {
		return "", 0
	}
	b := r.Schedule.At(r.Load).Range()
	if p == st.chosenFor {
		return b, st.chosenAt
	}
	return b, float64(max(r.Load, 1))
}

// followNow is the follower's latest state (nil before its first).
func (st *serveStatus) followNow() *FollowStatus {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.follow == nil {
		return nil
	}
	f := *st.follow
	return &f
}

func (st *serveStatus) setFollow(f FollowStatus) {
	st.mu.Lock()
	st.follow = &f
	st.mu.Unlock()
}

// hasFollow says the status shows the follower.
func (st *serveStatus) hasFollow() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.follow != nil
}

// followSwitches is the follower's switches shown so far.
func (st *serveStatus) followSwitches() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.follow == nil {
		return 0
	}
	return st.follow.Switches
}

func (st *serveStatus) setAdapt(v any) {
	st.mu.Lock()
	st.adapt = v
	st.mu.Unlock()
}

// statusEngine is the serving engine in /speclaunch/status.
type statusEngine struct {
	PID          int    `json:"pid"`
	Engine       string `json:"engine"`
	InternalPort int    `json:"internal_port"`
	URL          string `json:"url"`
	Width        int    `json:"width"` // 1 = speculation off
	// Drafter is the drafter kind and DrafterFrom what drafts (the draft
	// model, or the target's own layers), while speculation is on.
	Drafter      string  `json:"drafter,omitempty"`
	DrafterFrom  string  `json:"drafter_from,omitempty"`
	WidthSource  string  `json:"width_source"`
	WidthReason  string  `json:"width_reason"`
	Verified     bool    `json:"width_verified"`
	Verification string  `json:"verification"`
	UptimeS      float64 `json:"uptime_s"`
	InFlight     int     `json:"in_flight"`
	// Schedule is the width schedule in force (text form), Bucket its
	// bucket whose width runs, Load the load (requests in flight) that
	// width was chosen for.
	Schedule string   `json:"schedule,omitempty"`
	Bucket   string   `json:"bucket,omitempty"`
	Load     *float64 `json:"load,omitempty"` // set with Bucket, 0 included
}

func (st *serveStatus) handler(sv *launcher) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st.mu.Lock()
		out := map[string]any{
			"launcher_uptime_s": time.Since(st.started).Seconds(),
			"public":            st.public,
			"switch_mode":       st.mode,
			"switches_total":    st.total,
			"switches":          append([]switchRecord{}, st.switches...),
			"last_reload":       st.reload,
		}
		if in := st.cur; in != nil {
			chk := infoOf(in).Check
			p := st.desc
			e := statusEngine{PID: in.Proc.PID(), Engine: string(p.Settings.Engine.Value), InternalPort: in.Port,
				Width: widthOf(p), WidthSource: widthSourceOf(p), WidthReason: p.Resolution.Reason,
				Verified: chk.Verified, UptimeS: time.Since(in.Since).Seconds(), Schedule: st.scheduleOf(p)}
			var load float64
			if e.Bucket, load = st.bucketOf(p); e.Bucket != "" {
				e.Load = &load // 0 too: a follower's switch on an idle server
			}
			if e.Width > 1 {
				e.Drafter, e.DrafterFrom = string(p.Facts.Drafter), p.Facts.DrafterFrom
			}
			if in.Backend != nil {
				e.URL, e.InFlight = in.Backend.URL.String(), in.Backend.InFlight()
			}
			e.Verification = chk.Text()
			out["engine"] = e
		} else {
			out["engine"] = nil
		}
		if st.follow != nil {
			out["follow"] = st.follow
		}
		if st.adapt != nil {
			out["adapt"] = st.adapt
		}
		st.mu.Unlock()
		if sv.px != nil {
			out["proxy"] = sv.px.Stats()
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(sv.c.Secrets.Bytes(buf.Bytes())) // a secret in a note or an error shows masked
	})
}
