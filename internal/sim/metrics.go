package sim

import (
	"fmt"
	"net/http"
	"strings"
)

// prometheus serves GET /metrics with llama-server's llamacpp: families
// (internal/fakellama/testdata/new-spec-metrics-after.txt) and one speclaunch_sim family
// saying the numbers are simulated. The per-position family has W−1 labels,
// one per draft token, as llama-server sizes it to n_max; the sim shows it
// from the start (llama-server only after the first drafted request).
func (s *server) prometheus(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	m := s.metrics
	m.perPos = append([]int(nil), s.metrics.perPos...)
	s.mu.Unlock()

	var b strings.Builder
	family := func(name, typ, help string, v any) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n%s %v\n", name, help, name, typ, name, v)
	}
	family("speclaunch_sim_simulated", "gauge", "1: this engine is the speclaunch simulator; its numbers are never a measurement.", 1)
	family("llamacpp:prompt_tokens_total", "counter", "Number of prompt tokens processed.", m.promptTokens)
	family("llamacpp:prompt_seconds_total", "counter", "Prompt process time", round3(m.promptSeconds))
	family("llamacpp:tokens_predicted_total", "counter", "Number of generation tokens processed.", m.predictedTokens)
	family("llamacpp:tokens_predicted_seconds_total", "counter", "Predict process time", round3(m.predictSeconds))
	family("llamacpp:n_decode_total", "counter", "Total number of llama_decode() calls", m.decodes)
	family("llamacpp:spec_decode_num_draft_tokens_total", "counter", "Total draft tokens generated", m.draftTokens)
	family("llamacpp:spec_decode_num_accepted_tokens_total", "counter", "Total draft tokens accepted by the target model", m.acceptedTokens)
	family("llamacpp:spec_decode_num_drafts_total", "counter", "Total speculative decoding verification steps", m.drafts)
	family("llamacpp:requests_processing", "gauge", "Number of requests processing.", m.processing)
	family("llamacpp:requests_deferred", "gauge", "Number of requests deferred.", m.deferred)
	if len(m.perPos) > 0 {
		const name = "llamacpp:spec_decode_num_accepted_tokens_per_pos_total"
		fmt.Fprintf(&b, "# HELP %s Accepted tokens per draft position\n# TYPE %s counter\n", name, name)
		for i, c := range m.perPos {
			fmt.Fprintf(&b, "%s{position=\"%d\"} %d\n", name, i, c)
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.Write([]byte(b.String()))
}

func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }
