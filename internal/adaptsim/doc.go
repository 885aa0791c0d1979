// Package adaptsim is the calibrated sim matrix: an adaptive width
// controller run against engines priced through internal/simcost, in
// virtual time, over the sim's cost profiles and a replay of every
// committed H200 fixed-width cell, under steady, two-class and
// load-changing traffic. Each cell is scored against its per-phase
// oracle (the best fixed width of each phase on the mean engine) and
// against the engine's default width, the safe answer.
//
// The engine (engine.go) is closed form over 250 ms steps, client by
// client: each closed-loop client's request waits PickupRounds, then
// decodes its tokens at simcost.Model.CycleMS(W, n) a round (n the
// sequences on its engine) times the engine's own random effect
// (EngineDraw, EngineFactor: one draw per fresh engine) and SharedFactor
// while the engine a switch replaced drains, drawing its acceptance.
// A request's counts reach its engine's counters when it ends, as
// llama-server's /metrics do. A switch takes Profile.SwitchS, the old
// engine serving meanwhile; then new requests go to the new engine and
// the old one finishes those it holds.
//
// # How to plug a controller in
//
// Implement Controller (api.go): Start gets an Env (Probe prices a
// probe of the serving engine's verify cost by rows, at no virtual
// time; Log) and the first Scrape; Scrape is called every 2 virtual
// seconds with the serving engine's counters, width, generation, Shared
// (another engine beside it), the proxy's InFlight and the engine's
// Processing gauge; Switched when a switch it asked for has taken over,
// with how long it took. Each returns Commands: {Switch: w} asks for
// width w (dropped while another switch is under way or for the width
// serving). A pure Step(State, Observation) (State, []Action) controller
// (package control, issue 30) needs an adapter of a few lines: keep the State in
// the adapter, turn each call into an Observation, answer a probe
// action with Env.Probe at once, and return its switch actions as
// Commands. Then add it to Controllers in bench_test.go (or a file of
// its own beside it) and run
//
//	ADAPTSIM_CONTROLLER=name go test ./internal/adaptsim -run X -bench AdaptSimMatrix -benchtime 1x
//
// (ADAPTSIM_MATRIX_OUT=file.md writes the report). The controller's
// package must not import adaptsim outside its tests (adaptsim imports
// it); its own tests may, from an external test package.
//
// Loop (loop.go) plugs in today's loop, internal/adapt's Loop, through
// its public API: its goroutine runs as serve runs it, against an
// in-process http.RoundTripper, in lockstep with the harness.
package adaptsim
