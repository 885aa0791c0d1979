package bench

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/record"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// simFixture is a record as a sim sweep would leave it, built from fixed
// raw runs so that the rendering is deterministic: classic, the default
// (4), widths 2 and 3, a declined width 8 and a width 16 that failed.
func simFixture() *record.Record {
	rec := &record.Record{
		Schema: record.Schema, Name: "sim-gb10-affine-dflash", Date: "2026-12-01", Complete: true, Simulated: true,
		Key:      record.Key{Engine: "sim", Drafter: "dflash", Capability: "12.1", Quant: "affine"},
		Host:     record.Host{Hostname: "bench-host", Kernel: "6.8.0", Arch: "aarch64", GPU: "NVIDIA GB10", Driver: "580.95", Capability: "12.1", GPUCount: 1},
		Engine:   record.Engine{Name: "sim", Binary: "speclaunch", Version: "speclaunch sim 0.1.0", Pin: "sim 0.1.0"},
		Models:   []record.Model{{Role: "target", Path: "models/qwen3.5-4b-4bit", Bytes: 2400000000, Quant: "affine"}, {Role: "draft", Path: "models/qwen3.5-4b-dflash", Bytes: 1100000000, Kind: "dflash"}},
		Launcher: "speclaunch test",
		Method: record.Method{Schedule: ScheduleRestart, Rounds: 3, Warmup: 1, MaxTokens: 200, Prompt: DefaultPromptName,
			PromptSHA: "0f0e", Endpoint: Endpoint, Widths: []int{2, 3, 4, 8, 16},
			RequestBody: `{"prompt":"<code.py.txt, 525 bytes>","n_predict":200,"temperature":0,"top_k":1,"ignore_eos":true,"stream":true,"cache_prompt":true,"seed":42}`},
	}
	text := strings.Repeat("for i in range(n):\n    x += i\n", 10)
	other := text[:60] + "for attempt in range(3):\n" + text[85:]
	run := func(round int, bracket string, tokS, pps float64, draftN, acc, rounds int, txt string) record.Run {
		return record.Run{Round: round, Phase: PhaseMeasured, Bracket: bracket, WallS: 200 / tokS, TTFTS: 0.05, TokPerS: tokS,
			CompletionTokens: 200, PredictedMS: 200 / pps * 1000, PredictedPerS: pps, DraftN: draftN, DraftAccepted: acc, DraftRounds: rounds,
			Text: txt, TextSHA256: shaHex(txt), Pieces: 200}
	}
	warm := func(round int) record.Run {
		return record.Run{Round: round, Phase: PhaseWarmup, WallS: 4, TTFTS: 0.2, TokPerS: 50, CompletionTokens: 200, Text: text, TextSHA256: shaHex(text), Pieces: 200}
	}
	classic := record.Arm{Label: "classic", Kind: KindClassic}
	for r, v := range [][2]float64{{58.2, 58.4}, {58.0, 58.5}, {58.6, 58.2}} {
		classic.Runs = append(classic.Runs, warm(r+1), run(r+1, BracketFirst, v[0], v[0]*1.02, 0, 0, 0, text), warm(r+1), run(r+1, BracketLast, v[1], v[1]*1.02, 0, 0, 0, text))
	}
	spec := func(label, kind string, w int, rates []float64, acc, rounds int, txt string) record.Arm {
		a := record.Arm{Label: label, Kind: kind, Width: w, WidthSource: "flag"}
		for r, v := range rates {
			a.Runs = append(a.Runs, warm(r+1), run(r+1, "", v, v*1.03, rounds*(w-1), acc, rounds, txt))
		}
		return a
	}
	def := spec("default = 4 (measured default for sm_121 with an affine-quantized target)", KindDefault, 4, []float64{67.2, 67.9, 67.6}, 123, 77, text)
	def.WidthSource = "policy entry gb10-affine-dflash"
	w2 := spec("width 2", KindWidth, 2, []float64{68.1, 68.9, 68.5}, 85, 114, text)
	w3 := spec("width 3", KindWidth, 3, []float64{69.8, 70.7, 70.3}, 111, 89, other)
	w8 := spec("width 8", KindWidth, 8, []float64{58.1, 58.6, 58.3}, 0, 0, text)
	w8.Status, w8.StatusReason = record.StatusNotMeasurement, "the engine declined speculation: decline line in its log"
	w8.EngineWidth = 8
	w16 := record.Arm{Label: "width 16", Kind: KindWidth, Width: 16, Runs: []record.Run{}, Status: record.StatusFailed,
		StatusReason: "start failed: engine exited with status 1", LastLog: []string{"loading model", "error: out of memory"}}
	rec.Arms = []record.Arm{classic, def, w2, w3, w8, w16}
	Analyze(rec)
	return rec
}

func TestGoldenMarkdown(t *testing.T) {
	rec := simFixture()
	got := RenderMarkdown(rec)
	path := filepath.Join("testdata", "sim-sweep.golden.md")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./bench -run GoldenMarkdown -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("markdown differs from %s (rerun with -update and review the diff):\n%s", path, got)
	}
}

func TestFixtureVerdict(t *testing.T) {
	rec := simFixture()
	v := rec.Verdict
	if v.Best != 3 || v.RunnerUp != 2 || v.DefaultWidth != 4 {
		t.Errorf("verdict %+v", v)
	}
	if v.EarnsEntry || v.Entry != "" || !strings.Contains(v.NoEntryReason, "simulated") {
		t.Errorf("a simulated record earned an entry: %+v", v)
	}
	w3 := &rec.Arms[3]
	if w3.IdenticalToClassic == nil || *w3.IdenticalToClassic || w3.FirstDiffChar != 64 {
		t.Errorf("width 3 identity: %v char %d token %d", w3.IdenticalToClassic, w3.FirstDiffChar, w3.FirstDiffToken)
	}
	if w3.Acceptance.MeanAccepted < 2.24 || w3.Acceptance.MeanAccepted > 2.25 { // 200 / 89
		t.Errorf("width 3 mean accepted len %v", w3.Acceptance.MeanAccepted)
	}
	// a real (not simulated) copy of the same numbers earns the entry
	real := simFixture()
	real.Simulated = false
	Analyze(real)
	if !real.Verdict.EarnsEntry || !strings.Contains(real.Verdict.Entry, "width = 3\nrunner_up = 2\n") {
		t.Errorf("the real twin: %+v", real.Verdict)
	}
}

func TestRecordJSONRoundTrip(t *testing.T) {
	for name, rec := range map[string]*record.Record{"fixture": simFixture(), "empty": {}} {
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		var back record.Record
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*rec, back) {
			t.Errorf("%s: round trip differs:\n%+v\n%+v", name, *rec, back)
		}
	}
}

func TestAnalyzeIsIdempotent(t *testing.T) {
	rec := simFixture()
	b1, _ := json.Marshal(rec)
	Analyze(rec)
	b2, _ := json.Marshal(rec)
	if !bytes.Equal(b1, b2) {
		t.Error("a second Analyze changed the record")
	}
}

func TestWriteRefusesExisting(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "sweep")
	rec := simFixture()
	if err := Write(rec, base, false); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".md", ".json", ".svg"} {
		if _, err := os.Stat(base + ext); err != nil {
			t.Error(err)
		}
	}
	js, _ := os.ReadFile(base + ".json")
	var back record.Record
	if err := json.Unmarshal(js, &back); err != nil || back.Name != rec.Name {
		t.Errorf("json twin: %v %q", err, back.Name)
	}
	for _, ext := range []string{".md", ".json", ".svg"} {
		os.Remove(base + ".md")
		os.Remove(base + ".json")
		os.Remove(base + ".svg")
		if err := os.WriteFile(base+ext, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := Write(rec, base, false)
		if err == nil || !strings.Contains(err.Error(), base+ext) || !strings.Contains(err.Error(), "--force") {
			t.Errorf("%s exists: err = %v", ext, err)
		}
		if b, _ := os.ReadFile(base + ext); string(b) != "keep" {
			t.Errorf("%s was overwritten without force", ext)
		}
		if err := Write(rec, base, true); err != nil {
			t.Errorf("force: %v", err)
		}
	}
	// An unnamed record takes its name from the output.
	rec = simFixture()
	rec.Name = ""
	if err := Write(rec, filepath.Join(dir, "named-by-write"), false); err != nil || rec.Name != "named-by-write" {
		t.Errorf("name %q err %v", rec.Name, err)
	}
}

func TestSVG(t *testing.T) {
	rec := simFixture()
	b, err := RenderSVG(rec)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b))
	var texts []string
	xOf := map[string]float64{} // text -> its x
	x := 0.0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("svg is not XML: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			for _, a := range el.Attr {
				if el.Name.Local == "text" && a.Name.Local == "x" {
					fmt.Sscan(a.Value, &x)
				}
			}
		case xml.CharData:
			if s := strings.TrimSpace(string(el)); s != "" {
				texts = append(texts, s)
				xOf[s] = x
			}
		}
	}
	all := strings.Join(texts, " | ")
	for _, want := range []string{"NVIDIA GB10", "engine=sim drafter=dflash capability=12.1 quant=affine", "SIMULATED", "classic 58.3",
		"best: width 3, 70.3 (1.21x)", "1.21x", "engine's default"} {
		if !strings.Contains(all, want) {
			t.Errorf("svg text lacks %q: %s", want, all)
		}
	}
	// NOT A MEASUREMENT and failed arms are not plotted: the x axis ends at
	// the widest measured arm (4), not at 8 or 16.
	if slices.Contains(texts, "8") || slices.Contains(texts, "16") {
		t.Errorf("svg plots an unmeasured width: %q", all)
	}
	// The legend stands right of everything drawn for the data: tick
	// labels and the speedup labels beside the points.
	legendX := xOf["best: width 3, 70.3 (1.21x)"]
	for _, s := range []string{"2", "3", "4", "1.21x", "1.17x"} {
		if xOf[s] >= legendX {
			t.Errorf("%q at x %.1f is not left of the legend at %.1f", s, xOf[s], legendX)
		}
	}
	// Text names a font stack that renders alike without Liberation fonts.
	svg := string(b)
	if !strings.Contains(svg, svgFontFamily) || strings.Contains(svg, "font-family:Liberation") {
		t.Errorf("font families: %q", regexp.MustCompile(`font-family:[^;"]*`).FindAllString(svg, -1))
	}
}

func shaHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// A record bench writes reads back: a --notes-file paragraph wrapped over
// lines, a harness note holding an error's text and a title with a tab are
// written on one line each, so that record.Validate (policy propose and
// check, serve's follower gains) takes what bench wrote.
func TestWrittenProseReadsBack(t *testing.T) {
	base := filepath.Join(t.TempDir(), "sweep")
	rec := simFixture()
	rec.Title = "pair\tA"
	rec.Notes = append(rec.Notes, "The pair was made by\nquantizing the target.", "stopping width 4 engine 2: exit status 1\r\n")
	if err := Write(rec, base, false); err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(base + ".json")
	if err != nil {
		t.Fatal(err)
	}
	back, err := record.Decode(js)
	if err != nil {
		t.Fatalf("bench's own record refused: %v", err)
	}
	if back.Title != "pair A" || !slices.Contains(back.Notes, "The pair was made by quantizing the target.") {
		t.Errorf("title %q, notes %q", back.Title, back.Notes)
	}
}
