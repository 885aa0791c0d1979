package engine

import (
	"encoding/json"
	"fmt"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/width"
)

// VLLMScheduleKey is SpeculativeConfig's batch-size schedule field
// (vllm/config/speculative.py at 002e77c1): a list of inclusive
// (range_start, range_end, num_speculative_tokens) ranges starting at 1;
// K 0 is no speculation at that batch size, a gap or the tail after the
// last range carries the K before it, and every K is clamped to
// num_speculative_tokens (vllm/v1/spec_decode/dynamic/utils.py).
const VLLMScheduleKey = "num_speculative_tokens_per_batch_size"

// vllmScheduleSince is the first vLLM minor that has the field (0.24:
// docs/engines.md, "Schedules").
const vllmScheduleSince = 24

// vllmOpenEnd renders an open bucket's end: vLLM's ranges need an end >= 1
// and clamp it to max_num_seqs, so the largest load a schedule names reads
// as "no upper bound".
const vllmOpenEnd = 1 << 20

// TakesSchedule reports whether the engine takes a schedule of several
// widths itself (vLLM from 0.24 with --speculative-config); for the others
// serve follows the schedule (llama.cpp, mlxcel, sim) or runs one width
// (SGLang, an older vLLM), and warn says so where it is not obvious.
func TakesSchedule(e key.Engine, caps Caps) (ok bool, warn string) {
	switch e {
	case key.VLLM:
		if caps.Version == "" {
			return true, "the vLLM version was not detected: assumed 0.24 or later, which takes the schedule as " + VLLMScheduleKey + " (an older vLLM refuses it)"
		}
		_, major, minor, parsed := ParsePyVersion(caps.Version)
		if parsed && (major > 0 || minor >= vllmScheduleSince) {
			return true, ""
		}
		return false, fmt.Sprintf("vLLM %s predates %s (0.24): it runs one width, the schedule's at one request in flight; upgrade vLLM to let it pick the width by batch size", caps.Version, VLLMScheduleKey)
	case key.SGLang:
		return false, "SGLang takes no width schedule on its command line (--speculative-adaptive tunes steps from acceptance, per batch size, from a JSON file and for EAGLE only: docs/engines.md): it runs one width, the schedule's at one request in flight"
	}
	return false, ""
}

// RunsOneWidth reports whether e runs one width for a whole schedule of
// several widths, the schedule's at one request in flight: it takes no
// schedule itself and serve does not follow one on it (SGLang, a vLLM
// older than 0.24). llama.cpp, mlxcel and the sim run one width per
// engine, but serve follows the schedule for them.
func RunsOneWidth(e key.Engine, caps Caps) bool {
	if e != key.VLLM && e != key.SGLang {
		return false
	}
	ok, _ := TakesSchedule(e, caps)
	return !ok
}

// oneWidthWarn is the warning for a schedule of several widths that e
// runs as one width, naming that width where it is none (speculation
// off); "" when there is no such schedule or e takes it. It is given
// whether the width at one request speculates or not: the operator's
// other widths are dropped either way.
func oneWidthWarn(e key.Engine, r width.Resolution, caps Caps) string {
	if len(r.Schedule) < 2 || r.Schedule.IsFlat() || !RunsOneWidth(e, caps) {
		return ""
	}
	_, warn := TakesSchedule(e, caps)
	return warn + oneWidthNote(r.Schedule)
}

// oneWidthNote says that the one width run is none, where the schedule is
// off at one request in flight.
func oneWidthNote(s schedule.Schedule) string {
	if s.At(1).Width <= schedule.Off {
		return fmt.Sprintf(" (the schedule %s is off at one request, so speculation is off at every load)", s)
	}
	return ""
}

// vllmSchedule renders the schedule as vLLM's triples, in draft tokens
// (width - 1, so width 1 = K 0 = speculation off at that batch size).
func vllmSchedule(s schedule.Schedule) json.RawMessage {
	ts := make([][3]int, len(s))
	for i, b := range s {
		hi := b.Hi
		if hi == 0 {
			hi = max(vllmOpenEnd, b.Lo)
		}
		ts[i] = [3]int{b.Lo, hi, b.Width - 1}
	}
	out, _ := json.Marshal(ts) // ints only: cannot fail
	return out
}

// scheduleFor is the schedule an adapter hands the engine, nil when it
// runs one width (a flat schedule, or an engine that cannot take one).
func scheduleFor(e key.Engine, r width.Resolution, caps Caps) (schedule.Schedule, string) {
	if len(r.Schedule) < 2 || r.Schedule.IsFlat() {
		return nil, ""
	}
	ok, warn := TakesSchedule(e, caps)
	if !ok {
		return nil, oneWidthWarn(e, r, caps)
	}
	return r.Schedule, warn
}
