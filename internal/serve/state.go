package serve

import (
	"sync"
	"time"

	"github.com/speclaunch/speclaunch/internal/plan"
	"github.com/speclaunch/speclaunch/internal/server"
	"github.com/speclaunch/speclaunch/internal/watch"
)

// The launcher's state, by owner. What run wires up before any goroutine
// starts (the proxy, the runtime, the status page, the metrics) is
// read-only after and needs no lock; the reload loop's files are its own
// goroutine's (watched); what the runtime has in force (inForce) and the
// loops beside it (controllers) are written on the runtime's goroutine and
// read on others: one lock each, never held across a call out.

// watched is the reload loop's state: the files it reloads and watches.
// Run sets it before the loop starts and then only the loop's goroutine
// (feed, reload, followFiles) touches it: no lock.
type watched struct {
	files    []string        // the profile and policy files loaded last (followFiles)
	wasEmpty map[string]bool // files that were empty when first loaded
	watcher  *watch.Watcher  // nil when not watching
}

// inForce is what the runtime has in force: the plan, the load of the
// files it was built from, and the runtime's phase.
type inForce struct {
	mu   sync.Mutex
	plan *plan.Plan // the runtime's goroutine sets it (adopt)
	// load is the load of the files the plan was built from; an adaptive
	// switch builds on it while the files on disk do not make a plan that
	// can start (an edit the reload rejected), as the engine runs on it. A
	// job carries its plan's load (Job.Origin) until the plan is in force.
	load Load
	// phase is the runtime's state (NotePhase): a reload during a switch
	// is said to wait for it, not to have "nothing to do".
	phase server.Phase
}

func (f *inForce) get() *plan.Plan {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.plan
}

// take puts np in force and returns the plan it replaced; from is the load
// np was built from, nil to keep the load in force (np already was, or the
// runtime made its job).
func (f *inForce) take(np *plan.Plan, from Load) (prev *plan.Plan) {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev, f.plan = f.plan, np
	if from != nil {
		f.load = from
	}
	return prev
}

func (f *inForce) loadInForce() Load {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.load
}

func (f *inForce) setPhase(p server.Phase) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.phase = p
}

func (f *inForce) switching() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.phase == server.Switching
}

// settled says an engine serves with no start or switch under way: a
// reload that keeps its engine command is nothing to do now, not a job
// that waits for the first engine, or starts one after a crash.
func (f *inForce) settled() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.phase == server.Serving
}

// controllers is the state of the loops beside the runtime, the adaptive
// width and the schedule follower: which runs, how to stop it, and what
// they chose, which a reload keeps.
type controllers struct {
	mu   sync.Mutex
	loop Controller // the adaptive loop; nil when the width is not adapted, or no longer
	// stopAdapt and stopFollow stop the loops, nil when none runs; started:
	// they started, with the first engine that served.
	stopAdapt, stopFollow func()
	// adaptDone closes when the adaptive loop has ended, its last save
	// written: serve's exit waits on it, whoever stopped the loop
	// (NoteStopping stops it from a goroutine of its own).
	adaptDone <-chan struct{}
	started   bool
	// adapted is the width the adaptive loop switched to (1 = speculation
	// off), 0 before it has; a reload keeps it, or every profile edit (a
	// comment, a SIGHUP) would put the policy's width back.
	adapted int
	// firstStart is how long the first engine that served took to start
	// (it prices the follower's first switch).
	firstStart time.Duration
	// overruled: an operator width or schedule turned the adaptive width
	// off (at start, or a reload that ended the loop); it stays off until
	// speclaunch restarts, and the status says so by the plan in force.
	overruled bool
}

// adaptive is the adaptive loop, nil when none runs.
func (c *controllers) adaptive() Controller {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loop
}

// start says whether the loops are to start now (the first time only).
func (c *controllers) start() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	first := !c.started
	c.started = true
	return first
}

// ran records how to stop the loop that started: the adaptive one, or the
// follower.
func (c *controllers) ran(stop func(), follower bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if follower {
		c.stopFollow = stop
	} else {
		c.stopAdapt = stop
	}
}

// ranAdapt records the adaptive loop's end (adaptDone).
func (c *controllers) ranAdapt(done <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.adaptDone = done
}

// waitAdapt waits for the adaptive loop to end, if one ran.
func (c *controllers) waitAdapt() {
	c.mu.Lock()
	done := c.adaptDone
	c.mu.Unlock()
	if done != nil {
		<-done
	}
}

// takeStopAdapt returns the adaptive loop's stop (nil when none runs),
// and forgets it: it is called once. ended also forgets the loop.
func (c *controllers) takeStopAdapt(ended bool) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	stop := c.stopAdapt
	c.stopAdapt = nil
	if ended && stop != nil {
		c.loop = nil
	}
	return stop
}

// overrule records that an operator setting turned the adaptive width
// off for good.
func (c *controllers) overrule() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.overruled = true
}

// isOverruled says an operator setting turned the adaptive width off.
func (c *controllers) isOverruled() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.overruled
}

// noFollower says the loops started with the first engine and no
// follower runs.
func (c *controllers) noFollower() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.started && c.stopFollow == nil
}

func (c *controllers) takeStopFollow() func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	stop := c.stopFollow
	c.stopFollow = nil
	return stop
}

// adaptedTo records the adaptive loop's width after a switch (0: none,
// an operator's or the policy's width serves).
func (c *controllers) adaptedTo(w int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.adapted = w
}

// kept is what a reload keeps of the loops' choices: the adaptive width
// (its switch's reason is not the reload's: keptAdapted).
func (c *controllers) kept() (adapted int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.adapted
}

// startTook records how long an engine took to start: the first one that
// served prices the follower's first switch. It is not always the first
// start's: after a first start failed, the edit that waited for it started
// the engine that serves, and the follower priced its switch at 0 s (it
// read the default 10.3 s, nine times too slow to switch).
func (c *controllers) startTook(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.firstStart == 0 {
		c.firstStart = d
	}
}

// forFollower is what the follower starts from: whether the adaptive loop
// runs (it owns the width then) and the first engine's start time.
func (c *controllers) forFollower() (adapting bool, firstStart time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loop != nil, c.firstStart
}
