// Package sim is speclaunch's built-in stand-in engine: a small HTTP server
// that imitates mlxcel-server's command line, log lines and llama.cpp-style
// HTTP surface so the launcher and the bench can be exercised on a machine
// with no GPU, and so their tests have a real process to supervise.
//
// It is a simulator. Its tokens are synthetic words, its speed is a cost
// model (per-round verify cost and acceptance by width, by default the GB10
// affine figures of docs/benchmark_results/draft-block-width-default-gb10-2026-09-20.md,
// plus seeded noise), and it says
// so in every place it speaks: the startup line, each per-request line, the
// model list, /props and /metrics. Its numbers are never a measurement and a
// record made on it can never back a policy entry.
//
// For adaptive width it also speaks the llama-server surface the adapt
// loop reads: per-position acceptance counters in /metrics, token-array
// prompts with cache_prompt timed at the verify cost of the new rows,
// acceptance profiles chosen per request by a "[sim-profile:NAME]" marker in
// the prompt (Profiles), and the replay of a committed bench record
// (--sim-record, ReplayCost). docs/design/adaptive.md ("Testing it without
// a GPU: the sim") describes them.
//
// The launcher runs it as a separate process by re-executing itself with a
// hidden subcommand; this package provides ParseArgs and Run for that.
package sim
