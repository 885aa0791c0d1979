package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The JSON shapes below mirror llama-server's (internal/fakellama/testdata/new-spec-*),
// in its field order, with a "simulated" marker added where a client looks.

// completionRequest covers both /v1/completions (OpenAI) and /completion
// (native llama). Temperature and the rest are accepted and ignored: the sim
// is always greedy.
type completionRequest struct {
	Model         *string         `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	MaxTokens     *int            `json:"max_tokens"`
	NPredict      *int            `json:"n_predict"`
	Temperature   *float64        `json:"temperature"`
	Stream        bool            `json:"stream"`
	CachePrompt   *bool           `json:"cache_prompt"` // llama-server's default: true
	Messages      []chatMessage   `json:"messages"`     // /v1/chat/completions only
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// Token budget when a request names none (OpenAI's default) and the most one
// may ask for: the sim ignores EOS, so "until EOS" would never end.
const (
	defaultMaxTokens = 16
	maxMaxTokens     = 1 << 16
)

// budget returns the token count to generate.
func (r completionRequest) budget() (int, error) {
	n := defaultMaxTokens
	switch {
	case r.MaxTokens != nil:
		n = *r.MaxTokens
	case r.NPredict != nil:
		n = *r.NPredict
	}
	if n < 0 { // llama's n_predict -1: "until EOS"; the sim has no EOS
		n = defaultMaxTokens
	}
	if n > maxMaxTokens {
		return 0, fmt.Errorf("max_tokens %d is more than the sim's limit of %d", n, maxMaxTokens)
	}
	return n, nil
}

// promptTokenIDs returns the prompt's token ids when it is an array of token
// ids only (the probe's shape), else nil.
func promptTokenIDs(raw json.RawMessage) []int {
	var ids []int
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &ids) != nil || len(ids) == 0 {
		return nil
	}
	return ids
}

// promptText accepts a string, or an array of strings and/or token ids
// (joined, ids rendered as words), as llama-server accepts.
func promptText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", errors.New(`"prompt" is required`)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var items []any
	if err := json.Unmarshal(raw, &items); err != nil {
		return "", errors.New(`"prompt" must be a string or an array of strings or token ids`)
	}
	parts := make([]string, 0, len(items))
	for _, it := range items {
		switch v := it.(type) {
		case string:
			parts = append(parts, v)
		case float64:
			parts = append(parts, fmt.Sprintf("t%d", int64(v)))
		default:
			return "", errors.New(`"prompt" array items must be strings or token ids`)
		}
	}
	return strings.Join(parts, " "), nil
}

// timings is llama-server's per-request block. predicted_per_second is
// predicted_n / predicted_ms · 1000, llama.cpp's formula (the golden capture:
// 16 / 4.283 ms = 3735.7). mlxcel divides by predicted_n − 1 instead, since
// the first token comes from prefill; the sim follows llama.cpp so a client's
// n / wall agrees with it when prefill is short.
type timings struct {
	CacheN              int     `json:"cache_n"`
	PromptN             int     `json:"prompt_n"`
	PromptMS            float64 `json:"prompt_ms"`
	PromptPerTokenMS    float64 `json:"prompt_per_token_ms"`
	PromptPerSecond     float64 `json:"prompt_per_second"`
	PredictedN          int     `json:"predicted_n"`
	PredictedMS         float64 `json:"predicted_ms"`
	PredictedPerTokenMS float64 `json:"predicted_per_token_ms"`
	PredictedPerSecond  float64 `json:"predicted_per_second"`
	*draftTimings               // present only when a verify round ran (mlxcel #1588)
}

type draftTimings struct {
	DraftN         int    `json:"draft_n"`
	DraftNAccepted int    `json:"draft_n_accepted"`
	DraftRounds    int    `json:"draft_rounds"`
	DraftKind      string `json:"draft_kind"`
}

func newTimings(r result, kind string) timings {
	t := timings{CacheN: r.CacheN, PromptN: r.PromptN, PromptMS: r.PromptMS, PredictedN: r.PredictedN, PredictedMS: r.PredictedMS}
	if r.PromptN > 0 && r.PromptMS > 0 {
		t.PromptPerTokenMS = r.PromptMS / float64(r.PromptN)
		t.PromptPerSecond = float64(r.PromptN) / r.PromptMS * 1000
	}
	if r.PredictedN > 0 && r.PredictedMS > 0 {
		t.PredictedPerTokenMS = r.PredictedMS / float64(r.PredictedN)
		t.PredictedPerSecond = float64(r.PredictedN) / r.PredictedMS * 1000
	}
	if r.Rounds > 0 {
		t.draftTimings = &draftTimings{DraftN: r.Proposed, DraftNAccepted: r.Accepted, DraftRounds: r.Rounds, DraftKind: kind}
	}
	return t
}

// nativeEvent is one /completion stream event (and, with Stop, the final
// event or the non-stream body).
type nativeEvent struct {
	Index           int      `json:"index"`
	Content         string   `json:"content"`
	Tokens          []int    `json:"tokens"`
	Stop            bool     `json:"stop"`
	IDSlot          int      `json:"id_slot"`
	Model           string   `json:"model,omitempty"`
	TokensPredicted int      `json:"tokens_predicted"`
	TokensEvaluated int      `json:"tokens_evaluated"`
	Prompt          *string  `json:"prompt,omitempty"`
	StopType        string   `json:"stop_type,omitempty"`
	Timings         *timings `json:"timings,omitempty"`
	Simulated       bool     `json:"simulated,omitempty"`
}

// v1Chunk is one OpenAI text_completion chunk, or the non-stream body.
type v1Chunk struct {
	Choices           []v1Choice `json:"choices"`
	Created           int64      `json:"created"`
	Model             string     `json:"model"`
	SystemFingerprint string     `json:"system_fingerprint"`
	Object            string     `json:"object"`
	Usage             *usage     `json:"usage,omitempty"`
	ID                string     `json:"id"`
	Timings           *timings   `json:"timings,omitempty"`
	Simulated         bool       `json:"simulated,omitempty"`
}

type v1Choice struct {
	Text         string  `json:"text"`
	Index        int     `json:"index"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
}

type usage struct {
	CompletionTokens int `json:"completion_tokens"`
	PromptTokens     int `json:"prompt_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// apiError is llama-server's error body.
type apiError struct {
	Error struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	} `json:"error"`
}

func newAPIError(code int, typ, msg string) apiError {
	var e apiError
	e.Error.Code, e.Error.Type, e.Error.Message = code, typ, msg
	return e
}
