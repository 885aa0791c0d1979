package probe

import (
	"testing"
)

// Every id a probe sends lies inside the vocabulary, and fresh ids are
// distinct from the prefix's: a synthetic pair's 8,192-token vocabulary
// refused the old fixed ids on a real llama-server ("Prompt contains
// invalid tokens").
func TestTokenIDsFitTheVocabulary(t *testing.T) {
	for _, n := range []int{0, 431, 8192, 10000, 10001, 32000, 151936} {
		ids := tokenIDs(n)
		limit := n
		if n == 0 {
			limit = 1 << 30
		}
		last := ids.fresh + ids.span // the warm-up's token
		if ids.prefix < 0 || ids.prefix+probePrefixLen > ids.fresh || last >= limit || ids.span < 2 || ids.span%37 == 0 {
			t.Errorf("n_vocab %d: %+v (warm-up id %d) does not fit", n, ids, last)
		}
	}
}
