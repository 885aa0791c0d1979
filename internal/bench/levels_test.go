package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/speclaunch/speclaunch/internal/record"
)

// sseServer is a fake OpenAI-compatible engine: every completion streams
// a few tokens. Its rates are whatever the machine gives; the tests below
// check the sweep's structure, never its speed.
type sseServer struct {
	ts      *httptest.Server
	width   int
	stopped bool
	reg     *sseRegistry
}

type sseRegistry struct {
	mu          sync.Mutex
	live, total int
	failLabel   string
	onStart     func(n int)
	maxTokens   map[float64]bool // each request's max_tokens
}

func (r *sseRegistry) starter() Starter {
	return func(ctx context.Context, arm ArmSpec, port int) (Server, error) {
		if arm.Label == r.failLabel {
			return nil, errors.New("engine exited with status 1")
		}
		s := &sseServer{width: arm.Width, reg: r}
		s.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			var body struct {
				MaxTokens float64 `json:"max_tokens"`
			}
			if json.NewDecoder(req.Body).Decode(&body) == nil {
				r.mu.Lock()
				if r.maxTokens == nil {
					r.maxTokens = map[float64]bool{}
				}
				r.maxTokens[body.MaxTokens] = true
				r.mu.Unlock()
			}
			w.Header().Set("Content-Type", "text/event-stream")
			for range 4 {
				fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"t\",\"finish_reason\":null}]}\n\n")
				w.(http.Flusher).Flush()
				time.Sleep(time.Millisecond)
			}
			fmt.Fprint(w, "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
		}))
		r.mu.Lock()
		r.live++
		r.total++
		n := r.total
		r.mu.Unlock()
		if r.onStart != nil {
			r.onStart(n)
		}
		return s, nil
	}
}

func (s *sseServer) BaseURL() string     { return s.ts.URL }
func (s *sseServer) ModelID() string     { return "fake" }
func (s *sseServer) EngineWidth() int    { return s.width }
func (s *sseServer) Declined() bool      { return false }
func (s *sseServer) Diagnostics() []Diag { return nil }
func (s *sseServer) Tail() []string      { return []string{"fake engine log"} }
func (s *sseServer) Stop() error {
	s.ts.CloseClientConnections()
	s.ts.Close()
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	if !s.stopped {
		s.stopped = true
		s.reg.live--
	}
	return nil
}

func loadTestOptions() LoadOptions {
	return LoadOptions{Arms: specArms(), Levels: []int{1, 3}, Engines: 2, Warm: 10 * time.Millisecond, Window: 30 * time.Millisecond, Windows: 2,
		MaxTokens: 4, Prompts: []Prompt{{"a", "one"}, {"b", "two two"}}, PromptSet: "test"}
}

// A load sweep measures every arm at every level on Engines fresh engines,
// each engine's windows carrying its number as their round; it stops every
// engine, and its record validates and renders.
func TestRunLoadStructure(t *testing.T) {
	reg := &sseRegistry{}
	rec := &record.Record{Key: record.Key{Engine: "llama.cpp", Drafter: "draft-model", Capability: "9.0", Quant: "q4_k"}}
	var prog bytes.Buffer
	o := loadTestOptions()
	o.Progress, o.JSONProgress = &prog, true
	if err := RunLoad(context.Background(), o, reg.starter(), rec); err != nil {
		t.Fatal(err)
	}
	if reg.live != 0 || reg.total != len(o.Arms)*o.Engines {
		t.Errorf("live %d, started %d; want 0 and %d", reg.live, reg.total, len(o.Arms)*o.Engines)
	}
	// The requests vary in length, as a server's do (loadLengthSpread):
	// with one length classic's clients ran in step, its best case.
	if len(reg.maxTokens) < 2 {
		t.Errorf("max_tokens sent %v, want the lengths to vary by prompt", reg.maxTokens)
	}
	if !rec.Complete || len(rec.Arms) != 0 || len(rec.Levels) != 2 || rec.Method.Load == nil || rec.Earned == nil {
		t.Fatalf("record: complete %v, %d arms, %d levels, load %v, earned %v", rec.Complete, len(rec.Arms), len(rec.Levels), rec.Method.Load, rec.Earned)
	}
	for _, l := range rec.Levels {
		for _, a := range l.Arms {
			rounds := map[int]int{}
			for _, r := range a.Runs {
				if r.Requests != l.Concurrency || r.Phase != record.PhaseMeasured {
					t.Errorf("level %d %s: run %+v", l.Concurrency, a.Label, r)
				}
				rounds[r.Round]++
			}
			if len(rounds) != 2 || rounds[1] != 2 || rounds[2] != 2 {
				t.Errorf("level %d %s: windows by engine %v, want 2 engines of 2", l.Concurrency, a.Label, rounds)
			}
		}
		if l.Bucket.Why == "" || l.Bucket.Width == 0 {
			t.Errorf("level %d: no bucket verdict %+v", l.Concurrency, l.Bucket)
		}
	}
	js, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := record.Decode(js); err != nil {
		t.Fatalf("the record does not validate: %v", err)
	}
	out := filepath.Join(t.TempDir(), "sweep")
	if err := Write(rec, out, false); err != nil {
		t.Fatal(err)
	}
	md := string(RenderMarkdown(rec))
	for _, want := range []string{"## Schedule earned", "## 1 client", "## 3 clients", "Spread between engines", "Note: with 2 engines per width", "## Raw windows"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if n := strings.Count(prog.String(), `"event":"level"`); n != len(o.Arms)*o.Engines*len(o.Levels) {
		t.Errorf("%d level events, want %d", n, len(o.Arms)*o.Engines*len(o.Levels))
	}
}

// An arm whose engine does not start is failed at every level; the others
// are measured.
func TestRunLoadFailedArm(t *testing.T) {
	reg := &sseRegistry{failLabel: "width 6"}
	rec := &record.Record{}
	if err := RunLoad(context.Background(), loadTestOptions(), reg.starter(), rec); err != nil {
		t.Fatal(err)
	}
	for _, l := range rec.Levels {
		for _, a := range l.Arms {
			if want := a.Label == "width 6"; (a.Status == record.StatusFailed) != want {
				t.Errorf("level %d %s: status %s", l.Concurrency, a.Label, a.Status)
			}
		}
	}
}

// Cancelled mid-sweep: every engine stops, the record is marked
// incomplete, and the error is the context's.
func TestRunLoadCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reg := &sseRegistry{}
	reg.onStart = func(n int) {
		if n == 3 {
			cancel()
		}
	}
	rec := &record.Record{}
	err := RunLoad(ctx, loadTestOptions(), reg.starter(), rec)
	if !errors.Is(err, context.Canceled) || rec.Complete || reg.live != 0 {
		t.Errorf("err %v, complete %v, live %d", err, rec.Complete, reg.live)
	}
}

func TestLoadOptionsCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*LoadOptions)
		want string
	}{
		{"one engine", func(o *LoadOptions) { o.Engines = 1 }, "--engines 1: want 2 to 20"},
		{"descending levels", func(o *LoadOptions) { o.Levels = []int{4, 1} }, "ascend"},
		{"no default arm", func(o *LoadOptions) { o.Arms = []ArmSpec{o.Arms[0], o.Arms[2]} }, "default arm"},
		{"too many runs", func(o *LoadOptions) { o.Windows = 2000 }, "above what a record may hold"},
	} {
		o := loadTestOptions()
		tc.edit(&o)
		if _, err := o.WithDefaults(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The levels an engine's slots cannot hold at once are the ones past its
// slots; with its slots unknown, none.
func TestQueued(t *testing.T) {
	for _, tc := range []struct {
		name   string
		slots  int
		levels []int
		want   []int
		note   string // QueueNote at the last level
	}{
		{"one slot under a sweep", 1, []int{1, 2, 4, 8}, []int{2, 4, 8}, "the engine has 1 slot for 8 requests in flight (from): the excess requests queue"},
		{"slots for the top level", 8, []int{1, 2, 4, 8}, nil, ""},
		{"slots between levels", 4, []int{1, 4, 6}, []int{6}, "the engine has 4 slots for 6 requests in flight (from)"},
		{"slots unknown", 0, []int{1, 8}, nil, ""},
		{"one level within", 4, []int{4}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Queued(tc.slots, tc.levels); !slices.Equal(got, tc.want) {
				t.Errorf("Queued(%d, %v) = %v, want %v", tc.slots, tc.levels, got, tc.want)
			}
			note := QueueNote(tc.slots, "from", tc.levels[len(tc.levels)-1])
			if tc.note == "" && note != "" || !strings.Contains(note, tc.note) {
				t.Errorf("QueueNote = %q, want %q", note, tc.note)
			}
		})
	}
}

// A load sweep's record says the engine's slots, and under each level
// past them that the excess requests queue, as a record of one level says
// it in its notes: a sweep of a one-slot profile said nothing, and its
// 4-client level measured the rate of 1 client.
func TestLoadRecordSaysQueuedLevels(t *testing.T) {
	reg := &sseRegistry{}
	rec := &record.Record{Key: record.Key{Engine: "llama.cpp", Drafter: "draft-model", Capability: "9.0", Quant: "q4_k"}}
	o := loadTestOptions() // levels 1 and 3
	o.Progress, o.JSONProgress = io.Discard, true
	o.Slots, o.SlotsFrom = 2, "the operator's -np 2"
	if err := RunLoad(context.Background(), o, reg.starter(), rec); err != nil {
		t.Fatal(err)
	}
	if rec.Method.Slots != 2 || rec.Method.SlotsFrom != o.SlotsFrom {
		t.Errorf("record's slots %d from %q", rec.Method.Slots, rec.Method.SlotsFrom)
	}
	md := string(RenderMarkdown(rec))
	one, three, ok := strings.Cut(md[strings.Index(md, "## 1 client"):], "## 3 clients")
	if !ok {
		t.Fatalf("no level sections:\n%s", md)
	}
	note := "Note: the engine has 2 slots for 3 requests in flight (the operator's -np 2): the excess requests queue."
	if strings.Contains(one, "excess requests queue") || !strings.Contains(three, note) || !strings.Contains(md, "- engine slots: 2 (the operator's -np 2)") {
		t.Errorf("markdown does not say the queued level alone:\n%s", md)
	}
}
