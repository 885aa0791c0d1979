// Package record is the schema of a bench record's .json twin: every run's
// raw numbers and every derived figure. `speclaunch bench` writes it and
// `speclaunch policy check` reads it, so it is versioned and only ever grows.
// The cost side (time per draft+verify cycle by width) and the acceptance
// side (mean accepted length, acceptance by draft position) are kept apart
// so that a later policy can reuse one without the other.
package record

import "fmt"

// Schema is the current record schema version.
const Schema = 1

// Record is one bench run (or a transcription of an upstream record).
type Record struct {
	Schema    int    `json:"schema"`
	Name      string `json:"name"`
	Title     string `json:"title"`
	Date      string `json:"date"`     // RFC 3339 or YYYY-MM-DD
	Complete  bool   `json:"complete"` // false when interrupted: a partial record
	Simulated bool   `json:"simulated"`
	// Transcribed is set when the figures were copied from another project's
	// record rather than measured by speclaunch; Source must name it.
	Transcribed *Transcription `json:"transcribed,omitempty"`

	Key      Key      `json:"key"`
	Host     Host     `json:"host"`
	Engine   Engine   `json:"engine"`
	Models   []Model  `json:"models"`
	Launcher string   `json:"launcher"` // speclaunch version that wrote it
	Method   Method   `json:"method"`
	Arms     []Arm    `json:"arms"`
	Drift    Drift    `json:"drift"`
	Verdict  Verdict  `json:"verdict"`
	Notes    []string `json:"notes,omitempty"`
	// FirstRound is the cold-server check of round 1 (nil when too few
	// rounds carried first-token times).
	FirstRound *FirstRound `json:"first_round,omitempty"`
	// ProbeCheck is the adaptive loop's verify-cost probe run on one of
	// this record's engines after the rounds, against the cycles measured
	// (nil when the bench did not probe).
	ProbeCheck *ProbeCheck `json:"probe_check,omitempty"`
	// Levels are a load sweep's arms, level by level (empty in a record
	// of one load, whose arms are Arms); Earned is the schedule they earn.
	Levels []Level `json:"levels,omitempty"`
	Earned *Earned `json:"earned_schedule,omitempty"`
}

// ProbeCheck says whether `serve --adapt` can trust its probe on this
// build: a cycle is the probed forward over W rows plus drafting, so the
// probe must sit under every measured cycle. On an H200 build without
// flash-attention kernels an earlier probe priced 2-8 rows above the whole
// width-2 cycle, and the loop stayed at 0.77 of the best width.
type ProbeCheck struct {
	Arm   string       `json:"arm"`  // the arm whose server was probed
	Reps  int          `json:"reps"` // samples per row count (medians)
	Rows  []ProbeRow   `json:"rows"`
	Check []ProbeWidth `json:"check,omitempty"` // per measured width, classic as width 1
	// OK: the probe is under the measured cycle at every width ≥ 2.
	OK      bool   `json:"ok"`
	Verdict string `json:"verdict"`
	Error   string `json:"error,omitempty"` // why the probe gave no curve
}

// ProbeRow is the probed verify cost of one row count.
type ProbeRow struct {
	Rows int     `json:"rows"`
	MS   float64 `json:"ms"`
}

// ProbeWidth sets a width's measured cycle beside the probe at its rows;
// DraftPerTokenMS = (cycle − probe) / (W − 1), what the loop takes as the
// drafting cost.
type ProbeWidth struct {
	Width           int     `json:"width"`
	CycleMS         float64 `json:"cycle_ms"`
	ProbeMS         float64 `json:"probe_ms"`
	DraftPerTokenMS float64 `json:"draft_per_token_ms,omitempty"`
}

// Transcription names where transcribed figures came from.
type Transcription struct {
	Source string `json:"source"` // e.g. "lablup/mlxcel docs/benchmark_results/draft-block-width-default-gb10-2026-09-20.md"
	Date   string `json:"date"`
	Note   string `json:"note,omitempty"`
}

// Key is the policy key the record measures, in policy spelling.
type Key struct {
	Engine     string `json:"engine"`
	Drafter    string `json:"drafter"`
	Capability string `json:"capability"`
	Quant      string `json:"quant"`
}

// Host identifies the machine.
type Host struct {
	Hostname   string `json:"hostname,omitempty"`
	Kernel     string `json:"kernel,omitempty"`
	Arch       string `json:"arch,omitempty"`
	GPU        string `json:"gpu,omitempty"`
	Driver     string `json:"driver,omitempty"`
	Capability string `json:"capability,omitempty"`
	GPUCount   int    `json:"gpu_count,omitempty"`
}

// Engine identifies the engine binary.
type Engine struct {
	Name     string `json:"name"`
	Binary   string `json:"binary,omitempty"`
	Version  string `json:"version,omitempty"` // as the binary reports it
	Pin      string `json:"pin"`               // what a policy entry pins to, e.g. "llama.cpp d32676d"
	SHA256   string `json:"sha256,omitempty"`
	Spelling string `json:"flag_spelling,omitempty"` // llama.cpp: "2026" | "legacy"
}

// Model is a checkpoint used by the run.
type Model struct {
	Role  string `json:"role"` // target | draft
	Path  string `json:"path"`
	Bytes int64  `json:"bytes,omitempty"`
	// Content identifies the exact weights: a pair is its weights, and two
	// trainings of one recipe gave different best widths. ContentMethod
	// says what was hashed (a sample of a multi-GB file, or all of it).
	Content       string `json:"content_sha256,omitempty"`
	ContentMethod string `json:"content_method,omitempty"`
	Quant         string `json:"quant,omitempty"`
	Kind          string `json:"kind,omitempty"` // drafter kind, for the draft
	Note          string `json:"note,omitempty"`
}

// Method records how the numbers were taken.
type Method struct {
	Schedule    string `json:"schedule"` // resident | restart | transcribed
	Rounds      int    `json:"rounds"`
	Warmup      int    `json:"warmup"`
	MaxTokens   int    `json:"max_tokens"`
	Prompt      string `json:"prompt,omitempty"` // prompt file name
	PromptSHA   string `json:"prompt_sha256,omitempty"`
	Endpoint    string `json:"endpoint,omitempty"`
	Widths      []int  `json:"widths"`
	Description string `json:"description,omitempty"`
	// HarnessCPUS is the launcher's own CPU time during the run (engines
	// excluded) and WallS the run's wall time: the harness must stay a
	// small fraction of what it measures.
	HarnessCPUS float64 `json:"harness_cpu_s,omitempty"`
	WallS       float64 `json:"wall_s,omitempty"`
	// RequestCPUS is the launcher's CPU time during the measured requests
	// alone, and RequestWallS their summed wall time.
	RequestCPUS  float64 `json:"request_cpu_s,omitempty"`
	RequestWallS float64 `json:"request_wall_s,omitempty"`
	// RequestBody is the request sent for every run, the prompt elided.
	RequestBody string `json:"request_body,omitempty"`

	// PromptSet names the directory of a prompt set and Prompts its files;
	// runs then name their prompt (Run.Prompt). Empty for one prompt.
	PromptSet string   `json:"prompt_set,omitempty"`
	Prompts   []Prompt `json:"prompts,omitempty"`
	// Sampling is "greedy" (temperature 0, top_k 1: acceptance is then
	// deterministic and rounds measure timing jitter alone) or "sampled"
	// (Temperature > 0 with a fixed seed per request, SeedRule). Records
	// from before sampling existed leave it empty: they are greedy.
	Sampling    string  `json:"sampling,omitempty"`
	Temperature float64 `json:"temperature,omitempty"`
	SeedRule    string  `json:"seed_rule,omitempty"`
	// Concurrency is the number of requests in flight per measured visit
	// (0 or 1: one at a time); a run then aggregates them. Slots is the
	// engine's slot count and SlotsFrom where it came from.
	Concurrency int    `json:"concurrency,omitempty"`
	Slots       int    `json:"slots,omitempty"`
	SlotsFrom   string `json:"slots_from,omitempty"`
	// Bootstrap states how the comparisons' uncertainty was computed; nil
	// in records written before comparisons carried one.
	Bootstrap *BootstrapMethod `json:"bootstrap,omitempty"`
	// Load describes a load sweep's traffic and its units (nil for a
	// record of one load).
	Load *LoadMethod `json:"load,omitempty"`
}

// LoadMethod is how a load sweep measured: at each level, Concurrency
// closed-loop clients rotating through a prompt set, started out of step;
// after a warm-up, the aggregate streamed tokens/s of Windows windows is
// one run each; every arm on Engines fresh engines.
type LoadMethod struct {
	Levels  []int   `json:"levels"`
	Engines int     `json:"engines_per_arm"`
	WarmS   float64 `json:"warmup_s"`
	WindowS float64 `json:"window_s"`
	Windows int     `json:"windows"`
	Traffic string  `json:"traffic"`
}

// Prompt is one prompt file of a set.
type Prompt struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	Bytes  int    `json:"bytes"`
}

// BootstrapMethod is the resampling behind every Comparison of a record.
type BootstrapMethod struct {
	Resamples int    `json:"resamples"`
	Seed      uint64 `json:"seed"`
	Units     string `json:"units"`
}

// Comparison is one arm's median against another's, with the bootstrap's
// uncertainty (BootstrapMethod says how).
type Comparison struct {
	Against string  `json:"against"` // "classic" or "default (width 4)"
	Ratio   float64 `json:"ratio"`   // median / the other's median
	Lo      float64 `json:"lo"`      // central 95% of the resampled ratios
	Hi      float64 `json:"hi"`
	// PBetter is the share of resamples where this arm's median is above.
	PBetter   float64 `json:"p_better"`
	Resamples int     `json:"resamples"`
}

// PromptStats is an arm's end-to-end tokens/s on one prompt of a set.
type PromptStats struct {
	Prompt string `json:"prompt"`
	Stats  Stats  `json:"stats"`
}

// FirstRound compares the first measured round's first-token times with
// the later rounds': a server's first requests pay one-time costs that a
// warm-up must absorb (docs/benchmark_results/README.md).
type FirstRound struct {
	TTFTMS      float64 `json:"ttft_ms"`       // median over round 1's measured requests
	LaterTTFTMS float64 `json:"later_ttft_ms"` // median over later rounds
	Cold        bool    `json:"cold"`          // round 1 is more than twice as slow to the first token, and by 5 ms or more
	Verdict     string  `json:"verdict"`
}

// Arm statuses.
const (
	StatusOK             = "ok"
	StatusNotMeasurement = "not-a-measurement" // speculation did not run: never ranked
	StatusFailed         = "failed"            // the engine failed to start or every request failed
)

// Arm kinds. The default arm runs the engine's own default width (what it
// does with no width given); the policy arm runs the width the policy
// resolves for the key, present only when that differs from the default.
const (
	KindClassic = "classic"
	KindDefault = "default"
	KindPolicy  = "policy"
	KindWidth   = "width"
)

// Arm is one server configuration: classic, the policy default, or a width.
type Arm struct {
	Label       string `json:"label"` // e.g. "classic", "default = 4 (engine default ...)", "width 6"
	Kind        string `json:"kind"`  // classic | default | policy | width
	Width       int    `json:"width"` // resolved width; 0 for classic
	WidthSource string `json:"width_source,omitempty"`
	// EngineWidth is the width the engine reported running (0 = not read).
	EngineWidth  int      `json:"engine_width,omitempty"`
	Status       string   `json:"status"`
	StatusReason string   `json:"status_reason,omitempty"`
	Argv         []string `json:"argv,omitempty"`
	LastLog      []string `json:"last_log,omitempty"` // for failed arms

	Runs  []Run `json:"runs"`
	Stats Stats `json:"stats"` // end-to-end tokens/s over measured runs

	SpeedupVsClassic float64   `json:"speedup_vs_classic,omitempty"` // median / classic median
	PairedDeltas     []float64 `json:"paired_deltas_vs_classic,omitempty"`
	BeatsClassic     bool      `json:"beats_classic"` // min above classic's max (disjoint ranges)
	RangeVsClassic   string    `json:"range_vs_classic,omitempty"`
	// VsClassic and VsDefault bootstrap the arm's median against classic's
	// and against the default arm's (Method.Bootstrap).
	VsClassic *Comparison `json:"vs_classic,omitempty"`
	VsDefault *Comparison `json:"vs_default,omitempty"`
	// ByPrompt splits Stats by prompt when the record used a prompt set.
	ByPrompt []PromptStats `json:"by_prompt,omitempty"`

	Cost       Cost       `json:"cost"`
	Acceptance Acceptance `json:"acceptance"`

	IdenticalToClassic *bool `json:"identical_to_classic,omitempty"`
	FirstDiffToken     int   `json:"first_diff_token,omitempty"` // -1 = identical
	EngineRate         Stats `json:"engine_rate"`                // the engine's own decode rate (predicted_per_second)

	// FirstDiffChar is the character (rune) index of the first difference
	// from classic's text in the first differing measured run; -1 = identical.
	FirstDiffChar int `json:"first_diff_char,omitempty"`
	// IdentityNote qualifies the identity verdict, e.g. when the text is a
	// prefix of classic's because the stream ended early (old llama.cpp trees).
	IdentityNote string `json:"identity_note,omitempty"`
}

// Run is one request.
type Run struct {
	Round            int     `json:"round"`
	Phase            string  `json:"phase"` // warmup | measured
	WallS            float64 `json:"wall_s"`
	TTFTS            float64 `json:"ttft_s"`
	TokPerS          float64 `json:"tok_per_s"`
	CompletionTokens int     `json:"completion_tokens"`
	PredictedMS      float64 `json:"predicted_ms,omitempty"`
	PredictedPerS    float64 `json:"predicted_per_second,omitempty"`
	DraftN           int     `json:"draft_n,omitempty"`
	DraftAccepted    int     `json:"draft_n_accepted,omitempty"`
	DraftRounds      int     `json:"draft_rounds,omitempty"`
	TextSHA256       string  `json:"text_sha256,omitempty"`
	Text             string  `json:"text,omitempty"`
	Error            string  `json:"error,omitempty"`
	// Prompt names the run's prompt when the record used a set.
	Prompt string `json:"prompt,omitempty"`
	// Seed is the request's sampling seed when sampled (Method.SeedRule).
	Seed int64 `json:"seed,omitempty"`
	// Requests is how many concurrent requests the run aggregates (0 = one):
	// TokPerS is then their summed tokens over the wall time from the first
	// send to the last event, TTFTS the median first-token time.
	Requests int `json:"requests,omitempty"`
	// PromptN, CacheN and PromptMS are the engine's prompt timings (tokens
	// evaluated, tokens reused from the cache, and their time): they tell a
	// cold prefill from a cached prompt.
	PromptN  int     `json:"prompt_n,omitempty"`
	CacheN   int     `json:"cache_n,omitempty"`
	PromptMS float64 `json:"prompt_ms,omitempty"`

	// Bracket tells classic's two samples per round apart: first | last.
	Bracket string `json:"bracket,omitempty"`
	// Pieces is the number of streamed content events (not the token count:
	// old llama.cpp trees drop the last events of a drafted stream).
	Pieces int `json:"pieces,omitempty"`
	// Cycles is the request's draft+verify cycles and CyclesFrom where the
	// number came from: draft_rounds | diagnostics | metrics | drafted/(W-1).
	Cycles     int     `json:"cycles,omitempty"`
	CyclesFrom string  `json:"cycles_from,omitempty"`
	MSPerCycle float64 `json:"ms_per_cycle,omitempty"`
	// AcceptedByPos is the request's delta of llama.cpp's per-position
	// accepted-token counters (/metrics), when the server exposes them.
	AcceptedByPos []int `json:"accepted_by_pos,omitempty"`
	// Diag* sum the engine diagnostics lines (mlxcel "DFlash diagnostics")
	// logged for this request.
	DiagRounds   int     `json:"diag_rounds,omitempty"`
	DiagProposed int     `json:"diag_proposed,omitempty"`
	DiagAccepted int     `json:"diag_accepted,omitempty"`
	DiagSyncMS   float64 `json:"diag_sync_ms,omitempty"`
}

// Stats summarises one sample.
type Stats struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
}

// Cost is the engine's time per draft+verify cycle: a property of GPU,
// engine and weight format.
type Cost struct {
	MSPerCycle float64 `json:"ms_per_cycle,omitempty"` // median over measured runs
	Method     string  `json:"method,omitempty"`       // how it was derived
	VerifyRows int     `json:"verify_rows,omitempty"`  // = width
}

// Acceptance is the pair's acceptance profile at this width: a property of
// the model pair and the text.
type Acceptance struct {
	Rate         float64   `json:"rate,omitempty"`              // accepted / drafted
	MeanAccepted float64   `json:"mean_accepted_len,omitempty"` // tokens emitted per cycle, bonus included
	Drafted      int       `json:"drafted,omitempty"`
	Accepted     int       `json:"accepted,omitempty"`
	Cycles       int       `json:"cycles,omitempty"`
	ByPosition   []float64 `json:"by_position,omitempty"` // acceptance of draft position i (llama.cpp /metrics)
}

// Drift is the classic-first/classic-last bracket check.
type Drift struct {
	First   Stats  `json:"first"`
	Last    Stats  `json:"last"`
	Overlap bool   `json:"overlap"`
	Verdict string `json:"verdict"`
	// Early and Late are classic's first and second half in time order: a
	// steady slide across the run shows there, not in the brackets.
	Early Stats `json:"early,omitzero"`
	Late  Stats `json:"late,omitzero"`
}

// Verdict is what the record supports.
type Verdict struct {
	Best         int    `json:"best_width"` // 0 = no width beat classic
	BestLabel    string `json:"best_label,omitempty"`
	RunnerUp     int    `json:"runner_up_width,omitempty"`
	Why          string `json:"why"`
	EarnsEntry   bool   `json:"earns_entry"`
	Entry        string `json:"entry,omitempty"` // a ready [[entry]] block, only when earned
	DefaultWidth int    `json:"default_width,omitempty"`
	// NoEntryReason says why no entry is earned (empty when one is).
	NoEntryReason string `json:"no_entry_reason,omitempty"`
	// EntryWidth is the width the entry takes: the best width when it
	// passes every rule, else the next-ranked width that does.
	EntryWidth int `json:"entry_width,omitempty"`
	// PolicyWidth and PolicyEntry are what the policy resolved for the key
	// when the record was made (0 and "" when no measured entry applied);
	// CrossPair says plainly when that choice differs from this record's.
	PolicyWidth int    `json:"policy_width,omitempty"`
	PolicyEntry string `json:"policy_entry,omitempty"`
	CrossPair   string `json:"cross_pair,omitempty"`
}

// Representative returns the arm that stands for width w: the measured
// (status ok) speculative arm at w, an explicit width arm before a policy
// arm before the default arm. Records made before the default arm was the
// engine's own could measure one width under two names; their explicit
// width arm stands for the width, so that a figure is never reported for
// the wrong arm. nil when no arm at w measured. To look up many widths,
// build Representatives once: calling this per arm is quadratic in arms.
func (r *Record) Representative(w int) *Arm { return r.Representatives()[w] }

// Representatives maps every measured width to its representative arm
// (Representative), in one pass over the arms.
func (r *Record) Representatives() map[int]*Arm {
	rank := map[string]int{KindWidth: 3, KindPolicy: 2, KindDefault: 1}
	out := map[int]*Arm{}
	for i := range r.Arms {
		a := &r.Arms[i]
		if a.Kind == KindClassic || a.Status != StatusOK {
			continue
		}
		w := a.RanWidth()
		if best := out[w]; best == nil || rank[a.Kind] > rank[best.Kind] {
			out[w] = a
		}
	}
	return out
}

// RanWidth is the width the arm ran: the engine's report when it gave one.
func (a *Arm) RanWidth() int {
	if a.EngineWidth > 0 {
		return a.EngineWidth
	}
	return a.Width
}

// ClassicArm returns the record's (first) classic arm, nil when it has none.
func (r *Record) ClassicArm() *Arm {
	for i := range r.Arms {
		if r.Arms[i].Kind == KindClassic {
			return &r.Arms[i]
		}
	}
	return nil
}

// Run phases and classic's brackets (Run.Phase, Run.Bracket).
const (
	PhaseWarmup   = "warmup"
	PhaseMeasured = "measured"
	BracketFirst  = "first"
	BracketLast   = "last"
)

// Measured reports whether the run is a measured request that succeeded:
// the only runs any figure is computed from.
func (r *Run) Measured() bool { return r.Phase == PhaseMeasured && r.Error == "" }

// DefaultArm returns the record's default arm, nil when it has none.
func (r *Record) DefaultArm() *Arm {
	for i := range r.Arms {
		if r.Arms[i].Kind == KindDefault {
			return &r.Arms[i]
		}
	}
	return nil
}

// Level is one load level of a load sweep (`bench --concurrency 1,2,4,8`,
// `speclaunch tune`): every arm measured with Concurrency out-of-step
// clients. Its arms are a record's arms at that load, so every rule and
// figure of a one-level record applies to them (Record.AtLevel).
type Level struct {
	Concurrency int   `json:"concurrency"`
	Arms        []Arm `json:"arms"`
	// Spread is how far fresh engines of one configuration differed at
	// this load: runs from different engines are not independent draws
	// of one engine, and the bucket's comparison resamples engines.
	Spread Spread `json:"spread"`
	// Bucket is the width this load earned and why.
	Bucket LevelVerdict `json:"bucket"`
}

// Spread is the between-engine spread at one level: for each measured arm,
// the range of its engines' median rates over the arm's median.
type Spread struct {
	Engines int `json:"engines"` // fresh engines per arm
	// MaxRel and MedianRel are the largest and the median of the arms'
	// (max − min) / median of their engines' medians.
	MaxRel    float64     `json:"max_rel"`
	MedianRel float64     `json:"median_rel"`
	ByArm     []ArmSpread `json:"by_arm,omitempty"`
}

// ArmSpread is one arm's engines' median rates, in engine order.
type ArmSpread struct {
	Label   string    `json:"label"`
	Medians []float64 `json:"engine_medians"`
	Rel     float64   `json:"rel"`
}

// LevelVerdict is the width a level earned: a measured width that beats
// the default at this load with the evidence package's confidence, else
// classic (width 1) where classic does, else the default's width.
type LevelVerdict struct {
	Width int    `json:"width"`         // 1 = speculation off
	From  string `json:"from"`          // measured | classic | default
	Arm   string `json:"arm,omitempty"` // the arm that earned it
	// VsDefault is the earning arm's bootstrap against the default arm
	// (nil when the default's width stands).
	VsDefault *Comparison `json:"vs_default,omitempty"`
	Why       string      `json:"why"`
}

// At says the verdict at a level of clients, as policy propose and
// policy check print it ("1 client: width 6 (measured): …"; both said
// "1 clients").
func (v LevelVerdict) At(clients int) string {
	noun := "clients"
	if clients == 1 {
		noun = "client"
	}
	return fmt.Sprintf("%d %s: width %d (%s): %s", clients, noun, v.Width, v.From, v.Why)
}

// Earned is the schedule a load sweep earns: [lo, hi, width] triples (hi
// 0 = no upper bound, width 1 = off), one bucket per level from that level
// up to the next, neighbours of one width merged.
type Earned struct {
	Triples  [][]int `json:"triples"`
	Text     string  `json:"text"`     // "1:6,2-3:4,4+:1"
	Describe string  `json:"describe"` // "width 6 at 1 request, 4 at 2-3, off at 4+"
}

// AtLevel is the record as a one-level record of level i's arms: the
// rules and figures of a record apply to it unchanged.
func (r *Record) AtLevel(i int) *Record {
	v := *r
	v.Levels, v.Earned = nil, nil
	v.Arms = r.Levels[i].Arms
	v.Method.Concurrency = r.Levels[i].Concurrency
	return &v
}
