package fakellama

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The fake against a real llama-server (same d32676d tree, CUDA build) on
// an H200, 2026-11-30: ../../engine/testdata/h200, started by `speclaunch
// serve` with the command line in speclaunch-serve.log (-np 1,
// --spec-draft-n-max 5, --no-webui). The fake's text differs where the model
// does (tokenizer, output, acceptance); the shapes the launcher reads must
// not.

func readH200(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../../engine/testdata/h200/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// h200Argv is the engine command of the width-6 run, without the binary.
func h200Argv(t *testing.T) []string {
	t.Helper()
	m := regexp.MustCompile(`cmd="([^"]*)"`).FindSubmatch(readH200(t, "speclaunch-serve.log"))
	if m == nil {
		t.Fatal("speclaunch-serve.log has no cmd=")
	}
	argv := strings.Fields(string(m[1]))
	if !strings.HasSuffix(argv[0], "llama-server") || !slices.Contains(argv, "--spec-draft-n-max") {
		t.Fatalf("cmd %q", argv)
	}
	return argv[1:]
}

var (
	stampRE  = regexp.MustCompile(`^\d+\.\d{2}\.\d{3}\.\d{3} `)
	portRE   = regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
	numberRE = regexp.MustCompile(` *-?\d+(\.\d+)?`)
)

// logBody drops the timestamp and the port of a NEW log line.
func logBody(l string) string {
	return portRE.ReplaceAllString(stampRE.ReplaceAllString(l, ""), "http://127.0.0.1:PORT")
}

// logShape is logBody with every number (and the padding before it) as " N".
func logShape(l string) string { return numberRE.ReplaceAllString(logBody(l), " N") }

func logLines(b string) []string { return strings.Split(strings.TrimRight(b, "\n"), "\n") }

func TestServerMatchesH200(t *testing.T) {
	f := startFake(t, nil, h200Argv(t)...)

	// Before any request: /slots and /metrics byte for byte, /props by shape.
	for _, ep := range []struct {
		path, file string
		exact      bool
	}{{"/slots", "slots.json", true}, {"/metrics", "metrics.txt", true}, {"/props", "props.json", false}} {
		code, b := get(t, f.base+ep.path)
		want := readH200(t, ep.file)
		switch {
		case code != 200:
			t.Errorf("%s: %d", ep.path, code)
		case ep.exact && string(b) != string(want):
			t.Errorf("%s differs from %s:\n got %s\nwant %s", ep.path, ep.file, b, want)
		case !ep.exact && !slices.Equal(keyPaths(t, b), keyPaths(t, want)):
			t.Errorf("%s key set differs from %s", ep.path, ep.file)
		}
	}

	// The probe, a native stream and a /v1/completions stream, 16 tokens each.
	const prompt = `"prompt":"def fib(n):"`
	cb := post(t, f.base+"/completion", `{`+prompt+`,"n_predict":16,"temperature":0,"stream":false}`)
	sb := post(t, f.base+"/completion", `{`+prompt+`,"n_predict":16,"temperature":0,"stream":true}`)
	ob := post(t, f.base+"/v1/completions", `{`+prompt+`,"max_tokens":16,"temperature":0,"stream":true}`)

	want := readH200(t, "completion.json")
	if !slices.Equal(keyPaths(t, cb), keyPaths(t, want)) || !slices.Equal(topKeys(t, cb), topKeys(t, want)) {
		t.Errorf("/completion keys differ from completion.json:\n got %v\nwant %v", keyPaths(t, cb), keyPaths(t, want))
	}
	sev, cev := events(sb), events(readH200(t, "completion-stream.txt"))
	if len(sev) != len(cev) || len(sev) != 17 {
		t.Errorf("native stream: %d events, real %d", len(sev), len(cev))
	}
	if g, w := sev[len(sev)-1], cev[len(cev)-1]; !slices.Equal(keyPaths(t, g), keyPaths(t, w)) || !slices.Equal(topKeys(t, g), topKeys(t, w)) {
		t.Errorf("native stop event keys %v, real %v", topKeys(t, g), topKeys(t, w))
	}
	if !slices.Equal(topKeys(t, sev[0]), topKeys(t, cev[0])) {
		t.Errorf("native token event keys %v, real %v", topKeys(t, sev[0]), topKeys(t, cev[0]))
	}
	oev, ocap := events(ob), events(readH200(t, "v1-completions-stream.txt"))
	if len(oev) != len(ocap) || string(oev[len(oev)-1]) != "[DONE]" {
		t.Errorf("/v1/completions: %d events (real %d), last %q", len(oev), len(ocap), oev[len(oev)-1])
	}
	if g, w := oev[len(oev)-2], ocap[len(ocap)-2]; !slices.Equal(keyPaths(t, g), keyPaths(t, w)) || !slices.Equal(topKeys(t, g), topKeys(t, w)) {
		t.Errorf("final chunk keys %v, real %v", keyPaths(t, g), keyPaths(t, w))
	}
	var resp struct {
		TokensCached int `json:"tokens_cached"`
		Timings      struct {
			PredictedN int  `json:"predicted_n"`
			DraftN     *int `json:"draft_n"`
		} `json:"timings"`
	}
	if err := json.Unmarshal(cb, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.Timings.PredictedN != 16 || resp.Timings.DraftN == nil || *resp.Timings.DraftN == 0 {
		t.Errorf("probe timings %+v: want predicted_n 16 and draft_n", resp.Timings)
	}

	// After: /slots has no n_max (2026 tree), /metrics one label per draft
	// position = n_max 5.
	_, sa := get(t, f.base+"/slots")
	if !slices.Equal(keyPaths(t, sa), keyPaths(t, readH200(t, "slots-after.json"))) {
		t.Errorf("/slots after key set differs from slots-after.json")
	}
	if strings.Contains(string(sa), "n_max") || !strings.Contains(string(sa), `"speculative":true`) || !strings.Contains(string(sa), `"speculative.types":"none,draft-simple"`) {
		t.Errorf("/slots after: %s", sa)
	}
	_, ma := get(t, f.base+"/metrics")
	if g, w := metricNames(string(ma)), metricNames(string(readH200(t, "metrics-after.txt"))); !slices.Equal(g, w) {
		t.Errorf("/metrics after names %v, real %v", g, w)
	}
	label := `llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position=`
	if g, w := strings.Count(string(ma), label), strings.Count(string(readH200(t, "metrics-after.txt")), label); g != 5 || w != 5 {
		t.Errorf("%d per-position labels (real %d), want 5", g, w)
	}

	if code := f.stop(); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}

	// stderr: the startup and stop lines are the real ones (same paths and
	// flags), and every line has the shape of a real line and vice versa.
	fake, real := logLines(f.stderr.String()), logLines(string(readH200(t, "server-stderr.txt")))
	listen := slices.IndexFunc(real, func(l string) bool { return strings.Contains(l, "listening on") })
	if listen < 0 || len(fake) <= listen {
		t.Fatalf("no listening line:\n%s", f.stderr.String())
	}
	for i := 0; i <= listen; i++ {
		if g, w := logBody(fake[i]), logBody(real[i]); g != w {
			t.Errorf("startup line %d:\n got %q\nwant %q", i, g, w)
		}
	}
	if g, w := logBody(fake[len(fake)-1]), logBody(real[len(real)-1]); g != w {
		t.Errorf("last line:\n got %q\nwant %q", g, w)
	}
	shapes := func(ls []string) []string {
		var out []string
		for _, l := range ls {
			out = append(out, logShape(l))
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	if g, w := shapes(fake), shapes(real); !slices.Equal(g, w) {
		t.Errorf("log line shapes differ:\n got %q\nwant %q", g, w)
	}

	// The release line's n_tokens is the response's tokens_cached (prompt +
	// generated - 1), as in the real log (22) and completion.json (22).
	releaseRE := regexp.MustCompile(`release: .* n_tokens = (\d+),`)
	check := func(name string, ls []string, want int) {
		n := 0
		for _, l := range ls {
			if m := releaseRE.FindStringSubmatch(l); m != nil {
				n++
				if v, _ := strconv.Atoi(m[1]); v != want {
					t.Errorf("%s: %q: want n_tokens = %d", name, l, want)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no release line", name)
		}
	}
	var real0 struct {
		TokensCached int `json:"tokens_cached"`
	}
	if err := json.Unmarshal(want, &real0); err != nil || real0.TokensCached != 22 {
		t.Fatalf("completion.json tokens_cached %d, %v", real0.TokensCached, err)
	}
	check("real", real, real0.TokensCached)
	check("fake", fake, resp.TokensCached)
}

// The fake's 503 body is the real server's, byte for byte.
func TestLoadingBodyMatchesH200(t *testing.T) {
	var got []string
	for _, l := range logLines(string(readH200(t, "health-sequence.txt"))) {
		f := strings.SplitN(strings.TrimSpace(l), " ", 3)
		if len(f) == 3 && f[1] == "503" {
			got = append(got, f[2])
		}
	}
	if len(got) != 1 || got[0] != LoadingBody {
		t.Errorf("real 503 bodies %q, LoadingBody %q", got, LoadingBody)
	}
}
