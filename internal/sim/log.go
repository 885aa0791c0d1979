package sim

import (
	"fmt"
	"io"
	"sync"
)

// logger writes whole lines to the engine's stderr; handlers log
// concurrently, and the launcher reads the stream line by line.
type logger struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *logger) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format+"\n", args...)
}

// startup logs mlxcel's scheduler line for cfg: mlxcel-server logs one INFO
// line "Starting BatchScheduler (..., speculative=dflash (drafter=PATH,
// block_size=N, block_size_from=REASON, explicit_kind=B))" when its
// scheduler starts (src/server/speculative_dispatch.rs summary()), or
// "speculative=off". max_batch_size is the sim's slots: it said 1 under
// -np 4 (a user pass).
func (l *logger) startup(cfg Config) {
	spec := "speculative=off"
	if w, from := cfg.ResolveBlockSize(); w > 0 {
		spec = fmt.Sprintf("speculative=%s (drafter=%s, block_size=%d, block_size_from=%s, explicit_kind=%t)",
			cfg.kind(), cfg.DraftModel, w, from, cfg.DraftKind != "")
	}
	l.printf("Starting BatchScheduler (max_batch_size=%d, max_queue_depth=32, prefill_chunk_size=512, max_batch_prefill=4, decode_storage=auto, %s) %s", max(1, cfg.Slots), spec, simTag)
}

// diagnostics logs mlxcel's two per-request lines for a speculative request.
// The sim's verify is all sync wait, so verify_ms = target_argmax_sync_ms.
func (l *logger) diagnostics(width int, r result) {
	emitted := r.Accepted + r.Rounds
	l.printf("DFlash diagnostics block_size=%d rounds=%d proposed_tokens=%d accepted_tokens=%d acceptance_rate=%.4f emitted_per_verify=%.4f zero_accept_rounds=%d partial_accept_rounds=%d full_accept_rounds=%d draft_ms=%.1f verify_ms=%.1f target_argmax_sync_ms=%.1f decode_ms=%.1f simulated=true",
		width, r.Rounds, r.Proposed, r.Accepted, float64(r.Accepted)/float64(r.Proposed), float64(emitted)/float64(r.Rounds),
		r.ZeroAccept, r.Partial, r.FullAccept, r.DraftMS, r.VerifyMS, r.VerifyMS, r.PredictedMS)
	l.printf("Speculative burst completed prompt_tokens=%d generated_tokens=%d burst_ms=%.0f simulated=true",
		r.PromptN, r.PredictedN, r.PromptMS+r.PredictedMS)
}
