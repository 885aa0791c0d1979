package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// chatMessage is one OpenAI chat message. Content may be a string or an
// array of {type, text} parts; the sim reads the text of either.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// chatPrompt flattens messages into the prompt text the sim keys its
// continuation (and profile marker) on: "role: text" lines.
func chatPrompt(msgs []chatMessage) (string, error) {
	if len(msgs) == 0 {
		return "", fmt.Errorf(`"messages" is required and must not be empty`)
	}
	var b strings.Builder
	for i, m := range msgs {
		var text string
		if len(m.Content) > 0 && string(m.Content) != "null" {
			if err := json.Unmarshal(m.Content, &text); err != nil {
				var parts []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				}
				if err := json.Unmarshal(m.Content, &parts); err != nil {
					return "", fmt.Errorf("messages[%d].content must be a string or an array of content parts", i)
				}
				for _, p := range parts {
					text += p.Text
				}
			}
		}
		fmt.Fprintf(&b, "%s: %s\n", m.Role, text)
	}
	return b.String(), nil
}

// chatChunk is one OpenAI chat.completion(.chunk) object, with
// llama-server's timings on the last one.
type chatChunk struct {
	Choices           []chatChoice `json:"choices"`
	Created           int64        `json:"created"`
	ID                string       `json:"id"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Object            string       `json:"object"`
	Usage             *usage       `json:"usage,omitempty"`
	Timings           *timings     `json:"timings,omitempty"`
	Simulated         bool         `json:"simulated,omitempty"`
}

type chatChoice struct {
	FinishReason *string   `json:"finish_reason"`
	Index        int       `json:"index"`
	Message      *chatText `json:"message,omitempty"`
	Delta        *chatText `json:"delta,omitempty"`
}

type chatText struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content"`
}

// chatCompletions serves POST /v1/chat/completions as llama-server does:
// a chat.completion object, or a stream of chat.completion.chunk events
// (a first one carrying the role, one per token, a last one with
// finish_reason, usage and timings) ended by [DONE].
func (s *server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 16<<20)).Decode(&req); err != nil {
		writeDecodeError(w, &decodeError{http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("invalid JSON body: %v", err)})
		return
	}
	prompt, err := chatPrompt(req.Messages)
	if err != nil {
		writeDecodeError(w, &decodeError{http.StatusBadRequest, "invalid_request_error", err.Error()})
		return
	}
	n, err := req.budget()
	if err != nil {
		writeDecodeError(w, &decodeError{http.StatusBadRequest, "invalid_request_error", err.Error()})
		return
	}
	p, release, err := s.acquire(r)
	if err != nil {
		abort()
	}
	defer release()
	id := fmt.Sprintf("chatcmpl-sim-%d", p.reqNum)
	created := s.clk.Now().Unix()
	chunk := func(c chatChoice) chatChunk {
		obj := "chat.completion.chunk"
		if !req.Stream {
			obj = "chat.completion"
		}
		return chatChunk{Choices: []chatChoice{c}, Created: created, ID: id, Model: s.model,
			SystemFingerprint: "speclaunch-sim", Object: obj}
	}

	var rc *http.ResponseController
	emit := func([]token) error { return nil }
	if req.Stream {
		rc = startSSE(w)
		if err := sse(w, chunk(chatChoice{Delta: &chatText{Role: "assistant"}})); err != nil {
			return
		}
		emit = func(b []token) error {
			for _, t := range b {
				text := t.Text
				if err := sse(w, chunk(chatChoice{Delta: &chatText{Content: &text}})); err != nil {
					return err
				}
			}
			return rc.Flush()
		}
	}
	res, err := decode(r.Context(), s.clk, p, prompt, n, emit)
	if err != nil {
		abort()
	}
	s.finish(res)

	length := "length"
	var final chatChunk
	if req.Stream {
		final = chunk(chatChoice{FinishReason: &length, Delta: &chatText{}})
	} else {
		final = chunk(chatChoice{FinishReason: &length, Message: &chatText{Role: "assistant", Content: &res.Text}})
	}
	final.Usage = &usage{CompletionTokens: res.PredictedN, PromptTokens: res.PromptN, TotalTokens: res.PromptN + res.PredictedN}
	t := newTimings(res, s.kind)
	final.Timings = &t
	final.Simulated = true
	if !req.Stream {
		writeJSON(w, http.StatusOK, final)
		return
	}
	if sse(w, final) == nil {
		fmt.Fprint(w, "data: [DONE]\n\n")
		rc.Flush()
	}
}
