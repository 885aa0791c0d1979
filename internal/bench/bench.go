// Package bench measures draft widths against a classic (non-speculative)
// arm on a real engine and writes the record that may earn a policy entry.
//
// The method answers the flaws of upstream's served sweep (mlxcel
// sweep_server_widths.py): arms are visited in a rotating order every round
// so that slow drift spreads across the table instead of landing on the last
// arms; classic is sampled first and last in every round so drift is both
// detected and paired against; speedups count only with disjoint ranges;
// an arm where speculation did not run is NOT A MEASUREMENT and is never
// ranked; and the record keeps the cost side (time per draft+verify cycle)
// apart from the acceptance side (tokens per cycle), because the first is a
// property of GPU, engine and weight format and the second of the model pair
// and the text.
//
// Engines are started by the caller through a Starter, so the harness never
// knows how an engine is launched; it only speaks HTTP to it.
package bench

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"time"

	"github.com/speclaunch/speclaunch/internal/defaults"
	"github.com/speclaunch/speclaunch/internal/record"
)

// DefaultPrompt is the fixed prompt: hand-written Python source cut
// mid-function (about 160 tokens), so that every width continues the same
// text and acceptance reflects code completion, the usual served workload.
//
//go:embed prompts/code.py.txt
var DefaultPrompt string

// DefaultPromptName names DefaultPrompt in records.
const DefaultPromptName = "code.py.txt"

// Arm kinds (record.Kind*): the default arm runs the engine's own default
// width, the policy arm the policy's width when it differs.
const (
	KindClassic = record.KindClassic
	KindDefault = record.KindDefault
	KindPolicy  = record.KindPolicy
	KindWidth   = record.KindWidth
)

// Schedules.
const (
	ScheduleRestart  = defaults.BenchSchedule
	ScheduleResident = "resident"
)

// Defaults and floors of the method (docs/bench.md, "What a run measures").
const (
	DefaultRounds = defaults.BenchRounds
	MinRounds     = defaults.BenchMinRounds
	// DefaultWarmup is 3 discarded requests per server start: on the H200
	// records a llama-server's first two or three requests took 37-49 ms to
	// the first token against 5-7 ms afterwards (the first prefills the
	// whole prompt; the next one or two still pay one-time costs on the
	// cached-prompt path), and one warm-up left that in round 1.
	DefaultWarmup         = defaults.BenchWarmup
	DefaultMaxTokens      = defaults.BenchMaxTokens
	DefaultBasePort       = defaults.BenchBasePort
	DefaultRequestTimeout = defaults.BenchRequestTimeout
	// DefaultSeed is the request seed: every greedy request, and the base
	// of the per-request seeds when sampling (SeedRule).
	DefaultSeed = 42
	// MaxConcurrency bounds --concurrency: the harness opens one
	// connection per request in flight.
	MaxConcurrency = defaults.BenchMaxConcurrency
	// SeedRule states how a sampled request's seed is derived.
	SeedRule = "seed = 42 + 10007*round + 101*prompt index + k (k = the request's place in a concurrent batch; warm-ups are round 0)"
	// Endpoint is the one request every engine serves alike.
	Endpoint = "POST /completion"
)

// ArmSpec is one server configuration to measure.
type ArmSpec struct {
	Label       string // "classic", "default = 4 (engine default ...)", "policy = 6 (entry ...)", "width 6"
	Kind        string // classic | default | policy | width
	Width       int    // 0 for classic; for default the resolved width
	WidthSource string
}

// Server is one running engine process, as the Starter hands it over.
type Server interface {
	BaseURL() string
	ModelID() string     // for an OpenAI "model" field; may be ""
	EngineWidth() int    // width the engine reported running (0 unknown)
	Declined() bool      // the engine declined speculation (decline line seen)
	Diagnostics() []Diag // per-request engine diagnostics lines seen since start; may be empty
	Tail() []string      // last log lines (for failed arms)
	Stop() error
}

// Diag is one per-request engine diagnostics line (mlxcel "DFlash
// diagnostics": rounds, proposed_tokens, accepted_tokens,
// target_argmax_sync_ms, decode_ms; the *_ms fields are per-request totals).
type Diag struct {
	Rounds, Proposed, Accepted int
	SyncMS, DecodeMS           float64
}

// Starter starts one engine process for the arm on the given loopback port
// and returns once it is ready. On failure it may return a non-nil Server
// alongside the error so that the harness can keep its log tail; the
// harness stops it.
type Starter func(ctx context.Context, arm ArmSpec, port int) (Server, error)

// Options configure Run. Zero values take the defaults above.
type Options struct {
	Arms       []ArmSpec // exactly one classic arm, plus default and widths
	Rounds     int       // measured rounds; at least MinRounds (default DefaultRounds)
	Warmup     int       // discarded requests per server start: 0 means DefaultWarmup, negative means none
	MaxTokens  int       // n_predict (default DefaultMaxTokens)
	Prompt     string    // default DefaultPrompt
	PromptName string    // default DefaultPromptName when Prompt is empty
	// Prompts is a prompt set: every visit sends each prompt once, and
	// the record keeps per-prompt and pooled figures. It replaces Prompt.
	Prompts   []Prompt
	PromptSet string // the set's name (its directory) for the record

	// Temperature 0 (the default) is greedy; above 0 every request samples
	// with its own fixed seed (SeedRule).
	Temperature float64
	// Concurrency is the number of requests in flight per measured visit
	// (0 or 1: one at a time); Slots and SlotsFrom say how the engine was
	// sized for it, for the record.
	Concurrency int
	Slots       int
	SlotsFrom   string
	Schedule    string // restart (default) | resident
	BasePort    int    // arm i listens on BasePort+i (default DefaultBasePort)

	RequestTimeout time.Duration // per request, stalled streams included (default DefaultRequestTimeout)
	// APIKey goes on every request to the engines (warm-ups, measured
	// runs, scrapes, the probe) as "Authorization: Bearer"; "" for none.
	APIKey       string
	Progress     io.Writer // nil: no progress
	JSONProgress bool      // one JSON object per line
	IsTTY        bool      // rewrite one line with \r

	Seed int64 // unused: the rotation is deterministic; kept so a CLI flag has somewhere to land

	// Probe runs the adaptive loop's verify-cost probe on one speculative
	// arm's server after its last round and checks it against the measured
	// cycles (record.ProbeCheck); for engines that answer a token-array
	// /completion with prompt timings (llama.cpp, the sim).
	Probe bool
}

// Prompt is one prompt of a set.
type Prompt struct {
	Name, Text string
}

// Queued is the levels of requests in flight, of levels, that an engine
// of slots slots cannot decode at once (more requests than slots): there
// the excess requests queue behind the slots, and the rate measured is the
// slots', not the load's. None where the slots are unknown (0). The one
// rule behind bench's and tune's warning and the record's notes
// (QueueNote).
func Queued(slots int, levels []int) []int {
	var out []int
	for _, l := range levels {
		if slots > 0 && slots < l {
			out = append(out, l)
		}
	}
	return out
}

// QueueNote is what a record says of a level of inFlight requests in
// flight on an engine of slots slots (from: where that count came from),
// where the excess requests queue (Queued); "" elsewhere.
func QueueNote(slots int, from string, inFlight int) string {
	if len(Queued(slots, []int{inFlight})) == 0 {
		return ""
	}
	return fmt.Sprintf("the engine has %d %s for %d requests in flight (%s): the excess requests queue", slots, Plural(slots, "slot", "slots"), inFlight, from)
}
