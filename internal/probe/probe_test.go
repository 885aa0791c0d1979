package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// slotServer is llama-server's /completion as the probe meets it: slots
// that each cache their last token-array prompt, prompt_n the tokens past
// the common prefix (at least one), prompt_ms a fixed price per new row.
// busy stands for live traffic: before every request it puts a client's
// prompt in slot 0, as four clients on four slots did on an H100.
type slotServer struct {
	mu    sync.Mutex
	slots [4][]int
	busy  bool
	asked map[int]int // id_slot → requests
	// busyAfter, when set, starts the traffic after that many requests;
	// loaded is added to the price of a request on a slot the traffic
	// shares (any slot: the traffic's batch).
	busyAfter, seen int
	loaded          float64
}

func (s *slotServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.URL.Path == "/v1/models" {
		fmt.Fprint(w, `{"data":[{"meta":{"n_vocab":8192}}]}`)
		return
	}
	var req struct {
		Prompt      []int `json:"prompt"`
		CachePrompt bool  `json:"cache_prompt"`
		IDSlot      int   `json:"id_slot"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Prompt) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if s.asked == nil {
		s.asked = map[int]int{}
	}
	s.asked[req.IDSlot]++
	if s.seen++; s.busyAfter > 0 && s.seen > s.busyAfter {
		s.busy = true
	}
	if s.busy {
		s.slots[0] = []int{1, 7, 7, 7}
	}
	slot := req.IDSlot
	if slot < 0 {
		slot = 3 // the one a client left free
	}
	common := 0
	if req.CachePrompt {
		for common < len(s.slots[slot]) && common < len(req.Prompt)-1 && s.slots[slot][common] == req.Prompt[common] {
			common++
		}
	}
	s.slots[slot] = req.Prompt
	n := len(req.Prompt) - common
	ms := 1 + 0.1*float64(n)
	if req.IDSlot < 0 {
		ms += s.loaded
	}
	fmt.Fprintf(w, `{"content":"x","timings":{"prompt_n":%d,"prompt_ms":%g}}`, n, ms)
}

// A probe whose cached prefix live traffic evicts before every request
// measures its rows without one, and says so; an idle engine's probe keeps
// the prefix on slot 0.
func TestProbeGoesBareWhenTrafficTakesTheSlot(t *testing.T) {
	rows := []int{1, 4, 19}
	for _, busy := range []bool{false, true} {
		s := &slotServer{busy: busy}
		srv := httptest.NewServer(s)
		c, err := Run(context.Background(), srv.Client(), srv.URL, rows, 3)
		srv.Close()
		if err != nil {
			t.Fatalf("busy %v: %v", busy, err)
		}
		if c.Bare != busy {
			t.Errorf("busy %v: Bare is %v", busy, c.Bare)
		}
		for _, w := range rows {
			if want := 1 + 0.1*float64(w); c.VerifyMS[w] != want {
				t.Errorf("busy %v: %d rows priced %v ms, want %v (the new rows alone)", busy, w, c.VerifyMS[w], want)
			}
		}
		if !busy && s.asked[anySlot] != 0 {
			t.Errorf("idle: %d requests left slot 0", s.asked[anySlot])
		}
		// Bounded: the lost races of one sample, then 3 reps + warm-up per row count.
		if total := s.asked[0] + s.asked[anySlot]; total > 40 {
			t.Errorf("busy %v: %d requests", busy, total)
		}
		// Under traffic: the warm-up, a measured request, one re-warm and
		// its request, then bare (bareAfter); each waits for slot 0.
		if busy && s.asked[0] > 4 {
			t.Errorf("busy: %d requests to slot 0 before going bare, want at most 4", s.asked[0])
		}
	}
}

// Traffic that arrives while the probe runs sends it bare from then on,
// and the row counts it measured with the prefix are measured again, so
// that one curve is of one kind: here every row count's price holds the
// traffic's share.
func TestProbeGoneBareMeasuresEveryRowAgain(t *testing.T) {
	s := &slotServer{busyAfter: 8, loaded: 0.5}
	srv := httptest.NewServer(s)
	defer srv.Close()
	rows := []int{1, 4, 19}
	c, err := Run(context.Background(), srv.Client(), srv.URL, rows, 3)
	if err != nil || !c.Bare {
		t.Fatalf("err %v, bare %v; want a bare curve", err, c.Bare)
	}
	for _, w := range rows {
		if want := 1.5 + 0.1*float64(w); c.VerifyMS[w] != want {
			t.Errorf("%d rows priced %v ms, want %v (bare, with the traffic's share)", w, c.VerifyMS[w], want)
		}
	}
}
