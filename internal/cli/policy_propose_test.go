package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/policy"
	"github.com/speclaunch/speclaunch/internal/policycheck"
)

// `policy propose` over the two committed H200 Q8_0 records: under the
// bootstrap rule width 6 fails (probability 0.938 against the default in
// pair 1234) and the rule falls back to width 5. The entry it prints parses
// as policy and passes `policy check` against the same records, cost
// tables included.
func TestPolicyProposeH200Q8RoundTrip(t *testing.T) {
	root := filepath.Join("..", "..")
	var recs []string
	for _, p := range []string{"1234", "4321"} {
		recs = append(recs, filepath.Join(root, "docs", "benchmark_results", "h200-llamacpp-d32676d-q8_0-pair"+p+"-2026-11-30.json"))
	}
	out := &syncBuffer{}
	code := MainContext(context.Background(), append([]string{"policy", "propose"}, recs...), policyTOML, out, out, nil)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	text := out.String()
	for _, want := range []string{
		"width 6   0.972  <- runner-up  (fails)\n      - h200-llamacpp-d32676d-q8_0-pair1234-2026-11-30: width 6 beats the default (width 4) with probability 0.938",
		"width 5   0.903  <- chosen  (passes)",
		"fell back past width 6",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	block := text[strings.Index(text, "[[entry]]"):]
	f, err := policy.Parse("proposed.toml", []byte("schema = 1\n"+block))
	if err != nil {
		t.Fatalf("the proposed entry does not parse: %v\n%s", err, block)
	}
	e := f.Entries[0]
	if e.Width != 5 || e.RunnerUp != 6 || len(e.Records) != 2 || len(e.Cost) != 2 {
		t.Errorf("entry %+v", e)
	}
	vs, err := policycheck.Check(context.Background(), policy.Merge(f), func(p string) ([]byte, error) { return os.ReadFile(filepath.Join(root, filepath.FromSlash(p))) })
	if err != nil {
		t.Fatal(err)
	}
	if !vs[0].OK {
		t.Errorf("the proposed entry fails its own check: %q", vs[0].Problems)
	}
}

// The shipped policy follows the rule over every committed H200 record of a
// key: propose over all of them earns nothing for Q8_0 (the third pair's
// best width was 2 and no width beats the default with probability >= 0.95
// there), and the embedded policy has no entry for it.
func TestPolicyH200Q8EntryDroppedByTheRule(t *testing.T) {
	recs, err := filepath.Glob(filepath.Join("..", "..", "docs", "benchmark_results", "h200-llamacpp-d32676d-q8_0-pair*.json"))
	if err != nil || len(recs) < 3 {
		t.Fatalf("want the three committed Q8_0 records, found %v (%v)", recs, err)
	}
	out := &syncBuffer{}
	code := MainContext(context.Background(), append([]string{"policy", "propose"}, recs...), policyTOML, out, out, nil)
	if code == 0 || !strings.Contains(out.String(), "the records do not earn an entry") {
		t.Fatalf("exit %d; want no entry earned:\n%s", code, out)
	}
	// Over eight records a width fails for a dozen reasons: one per line,
	// never one line of thousands of characters.
	for _, l := range strings.Split(out.String(), "\n") {
		if len(l) > 400 {
			t.Errorf("a line of %d characters: %.120s...", len(l), l)
		}
	}
	f, err := policy.Parse("policy.toml", policyTOML)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range f.Entries {
		if e.Key.Engine == key.LlamaCpp && e.Key.Quant == key.QuantQ8_0 {
			t.Errorf("the embedded policy keeps %s (width %d), which its records no longer earn", e.ID, e.Width)
		}
	}
}
