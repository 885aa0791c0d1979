package llamaflags

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

func readHelp(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../fakellama/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every option line of a captured --help parses: none is skipped silently.
func TestParseReadsEveryOptionLine(t *testing.T) {
	for _, name := range []string{"new-help.txt", "old-help.txt"} {
		help := readHelp(t, name)
		want := 0
		for _, l := range strings.Split(help, "\n") {
			if strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "-----") {
				want++
			}
		}
		if got := len(Parse(help)); got != want || want < 200 {
			t.Errorf("%s: parsed %d options, want %d option lines", name, got, want)
		}
	}
}

func TestParseArity(t *testing.T) {
	help := readHelp(t, "new-help.txt")
	m, err := Merge(Parse(help))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want int
	}{
		{"-ngl", 1}, {"--n-gpu-layers", 1}, {"-c", 1}, {"-fa", 1}, {"--jinja", 0}, {"--no-jinja", 0},
		{"-np", 1}, {"-hf", 1}, {"-md", 1}, {"--spec-type", 1}, {"--metrics", 0}, {"-h", 0},
		{"--control-vector-layer-range", 2}, {"-kvu", 0}, {"--version", 0}, {"--draft-max", 1},
		// spaces inside <...> are one value
		{"-ot", 1}, {"--override-tensor-draft", 1}, {"-dr", 1},
	} {
		f, ok := m[c.name]
		if !ok {
			t.Errorf("%s: not parsed", c.name)
			continue
		}
		if f.Values != c.want {
			t.Errorf("%s: %d values, want %d (hint %q)", c.name, f.Values, c.want, f.Hint)
		}
	}
}

func TestMergeRefusesArityConflict(t *testing.T) {
	a := []Flag{{Names: []string{"-x", "--ex"}, Values: 1, Hint: "N"}}
	b := []Flag{{Names: []string{"--ex"}}}
	if _, err := Merge(a, b); err == nil || !strings.Contains(err.Error(), "--ex") {
		t.Fatalf("Merge = %v, want an error naming --ex", err)
	}
}

// The committed table is what the generator makes from the committed
// captures: a new capture without `go generate` fails here.
func TestTableIsCurrent(t *testing.T) {
	m, err := Merge(Parse(readHelp(t, "new-help.txt")), Parse(readHelp(t, "old-help.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != len(values) {
		t.Errorf("table has %d names, the captures %d: run go generate ./internal/llamaflags", len(values), len(m))
	}
	for n, f := range m {
		if v, ok := Values(n); !ok || v != f.Values {
			t.Errorf("%s: table says %d (known %v), the captures %d: run go generate ./internal/llamaflags", n, v, ok, f.Values)
		}
	}
	for i, name := range []string{"new-help.txt", "old-help.txt"} {
		tm, err := Merge(Parse(readHelp(t, name)))
		if err != nil {
			t.Fatal(err)
		}
		for n := range m {
			if _, ok := tm[n]; ListedBy(n, Tree(i)) != ok {
				t.Errorf("%s: the table says %s lists it %v, the capture %v: run go generate ./internal/llamaflags", n, name, !ok, ok)
			}
		}
		if got := len(AllOf(Tree(i))); got != len(tm) {
			t.Errorf("%s: AllOf lists %d flags, the capture %d", name, got, len(tm))
		}
	}
	envs, err := Envs(Parse(readHelp(t, "new-help.txt")), Parse(readHelp(t, "old-help.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(envs, envFlags) {
		t.Errorf("table has %d variables, the captures %d (or they differ): run go generate ./internal/llamaflags", len(envFlags), len(envs))
	}
	stubs := map[string]string{}
	for _, f := range Parse(readHelp(t, "new-help.txt")) {
		for _, n := range f.Names {
			if f.Removed != "" {
				stubs[n] = f.Removed
			}
		}
	}
	if !maps.Equal(stubs, removed) {
		t.Errorf("table has %d removed flags, the newest capture %d (or they differ): run go generate ./internal/llamaflags", len(removed), len(stubs))
	}
}

// The flags the 2026 --help lists as removed stubs are known with its
// words, which name the replacement; a flag it takes is not removed.
func TestRemoved(t *testing.T) {
	for _, c := range []struct {
		name, want string // want "" = not removed
	}{
		{"--spec-ngram-size-n", "the argument has been removed. use the respective --spec-ngram-*-size-n or --spec-ngram-mod-n-match"},
		{"--spec-ngram-size-m", "use the respective --spec-ngram-*-size-m"},
		{"--spec-ngram-min-hits", "use the respective --spec-ngram-*-min-hits"},
		{"--draft-n-min", "use --spec-draft-n-min or --spec-ngram-mod-n-min"},
		{"--spec-draft-n-min", ""},
		{"--spec-ngram-mod-n-match", ""},
		{"-ngl", ""},
		{"--bogus", ""},
	} {
		why, ok := Removed(c.name)
		if ok != (c.want != "") || !strings.Contains(why, c.want) {
			t.Errorf("%s: removed %v (%q), want %q", c.name, ok, why, c.want)
		}
	}
}

// EnvFlag knows the flag of each variable llama-server reads, under
// either tree's name, and no flag for a variable of none.
func TestEnvFlag(t *testing.T) {
	for _, c := range []struct {
		env  string
		want []string
	}{
		{"LLAMA_ARG_CTX_SIZE", []string{"-c", "--ctx-size"}},
		{"LLAMA_ARG_N_GPU_LAYERS", []string{"-ngl", "--gpu-layers", "--n-gpu-layers"}},
		{"LLAMA_ARG_N_PARALLEL", []string{"-np", "--parallel"}},
		{"LLAMA_ARG_SPEC_DRAFT_MODEL", []string{"--spec-draft-model", "-md", "--model-draft"}}, // the new tree's name
		{"LLAMA_ARG_MODEL_DRAFT", []string{"--spec-draft-model", "-md", "--model-draft"}},      // the old tree's
		{"LLAMA_ARG_NOPE", nil},
		{"MLXCEL_PORT", nil},
	} {
		if got := EnvFlag(c.env); !slices.Equal(got, c.want) {
			t.Errorf("EnvFlag(%s) = %q, want %q", c.env, got, c.want)
		}
	}
}

// A variable that two trees give to unrelated flags is refused: which
// flag it sets would be a guess.
func TestEnvsRefusesConflict(t *testing.T) {
	a := []Flag{{Names: []string{"-x"}, Env: "LLAMA_ARG_X"}}
	b := []Flag{{Names: []string{"-y"}, Env: "LLAMA_ARG_X"}}
	if _, err := Envs(a, b); err == nil || !strings.Contains(err.Error(), "LLAMA_ARG_X") {
		t.Fatalf("Envs = %v, want an error naming LLAMA_ARG_X", err)
	}
}

// Each tree lists its own flags: a flag of one tree alone is no flag of
// the other's, which refuses to start on it.
func TestListedBy(t *testing.T) {
	for _, c := range []struct {
		name           string
		in2026, legacy bool
	}{
		{"-ngl", true, true},
		{"--spec-draft-n-min", true, false},
		{"--spec-draft-model", true, false},
		{"--draft-min", true, true}, // a removed stub in 2026 trees, listed all the same
		{"--ctx-size-draft", false, true},
		{"--bogus", false, false},
	} {
		if got := ListedBy(c.name, Tree2026); got != c.in2026 {
			t.Errorf("%s: listed by the 2026 tree %v, want %v", c.name, got, c.in2026)
		}
		if got := ListedBy(c.name, TreeLegacy); got != c.legacy {
			t.Errorf("%s: listed by the legacy tree %v, want %v", c.name, got, c.legacy)
		}
	}
}
