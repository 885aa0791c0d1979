// Package record is the schema of a bench record's .json twin: every run's
// raw numbers and every derived figure. `speclaunch bench` writes it and
// `speclaunch policy check` reads it, so it is versioned and only ever grows.
// The cost side (time per draft+verify cycle by width) and the acceptance
// side (mean accepted length, acceptance by draft position) are kept apart
// so that a later policy can reuse one without the other.
package record

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
	Quant string `json:"quant,omitempty"`
	Kind  string `json:"kind,omitempty"` // drafter kind, for the draft
	Note  string `json:"note,omitempty"`
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
}

// Arm statuses.
const (
	StatusOK             = "ok"
	StatusNotMeasurement = "not-a-measurement" // speculation did not run: never ranked
	StatusFailed         = "failed"            // the engine failed to start or every request failed
)

// Arm is one server configuration: classic, the policy default, or a width.
type Arm struct {
	Label       string `json:"label"` // e.g. "classic", "default = 4 (measured default ...)", "width 6 (flag)"
	Kind        string `json:"kind"`  // classic | default | width
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
}
