package sim

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// plan is what one request decodes with: fixed for the server except the
// request number, which seeds the noise, and the drift slowdown.
type plan struct {
	width  int // 0: classic decode (no drafter, or the drafter declined)
	cost   CostModel
	seed   int64
	reqNum uint64  // 0-based request number on this server
	slow   float64 // cost multiplier: 1 + Drift·reqNum
	// prompt, when set, replaces the prefill: new tokens evaluated after a
	// cached prefix (a token-array prompt with cache_prompt).
	prompt *promptEval
	// active, when set, returns how many requests decode together now:
	// their verify rows add up (Config.Slots).
	active func() int
}

// together is the number of sequences decoding together, at least 1.
func (p plan) together() int {
	if p.active == nil {
		return 1
	}
	return max(1, p.active())
}

// promptEval is a prefill over New tokens after Cached reused ones; it
// costs one target forward over New rows (CostModel.VerifyRowsMS).
type promptEval struct{ New, Cached int }

// result is one request's outcome, in the units the engine reports.
type result struct {
	PromptN, PredictedN int
	CacheN              int     // prompt tokens reused from the slot's cache
	PromptMS            float64 // request start (slot acquired) to first token
	PredictedMS         float64 // first token to last token, measured on the clock
	Rounds, Proposed    int
	Accepted            int   // draft tokens accepted; = round-emitted tokens − rounds
	PerPos              []int // acceptances by draft position, len W−1
	ZeroAccept, Partial int   // rounds accepting no / some draft tokens
	FullAccept          int   // rounds accepting every draft token
	DraftMS, VerifyMS   float64
	Text                string
	Tokens              []int
}

// decode generates n tokens for prompt, waiting as the cost model says and
// calling emit with each burst as it completes: the first token after
// prefill, then one burst per verify round (or one token per classic step).
// Waits run against absolute deadlines so timer overshoot does not
// accumulate over a request.
func decode(ctx context.Context, clk Clock, p plan, prompt string, n int, emit func([]token) error) (res result, err error) {
	res.PromptN = countPromptTokens(prompt)
	prefillMS := float64(res.PromptN) * p.cost.PromptTokenMS
	if p.prompt != nil {
		res.PromptN, res.CacheN = p.prompt.New, p.prompt.Cached
		prefillMS = p.cost.VerifyRowsMS(p.prompt.New)
	}
	var text strings.Builder
	defer func() { res.Text = text.String() }()
	if p.width >= 2 {
		res.PerPos = make([]int, p.width-1)
	}
	noise := rand.New(rand.NewPCG(uint64(p.seed), p.reqNum))
	factor := func() float64 {
		f := 1 + p.cost.Noise*noise.NormFloat64()
		return math.Max(0.05, f) * p.slow
	}
	start := clk.Now()
	deadline := start
	wait := func(ms float64) error {
		deadline = deadline.Add(time.Duration(ms * float64(time.Millisecond)))
		return clk.Sleep(ctx, deadline.Sub(clk.Now()))
	}
	toks := newTokenStream(prompt)
	burst := func(k int) error {
		b := make([]token, k)
		for i := range b {
			b[i] = toks.next()
			res.Tokens = append(res.Tokens, b[i].ID)
			text.WriteString(b[i].Text)
		}
		res.PredictedN += k
		return emit(b)
	}
	if n <= 0 {
		return res, nil
	}

	// Prefill yields the first token, as in llama.cpp and mlxcel.
	if err := wait(prefillMS * factor()); err != nil {
		return res, err
	}
	first := clk.Now()
	res.PromptMS = ms(first.Sub(start))
	if err := burst(1); err != nil {
		return res, err
	}

	left := n - 1
	if p.width >= 2 {
		w := p.width
		u := rand.New(rand.NewPCG(uint64(p.seed)^hashPrompt(prompt), uint64(w))).Float64()
		prob := acceptProb(w, p.cost.EmittedPerVerify(w))
		profile := promptProfile(prompt)
		if profile == nil {
			profile = p.cost.Accept
		}
		draftMS := p.cost.DraftRoundMS(w)
		for left > 0 {
			verifyMS := p.cost.VerifyMS(w)
			if n := p.together(); n > 1 {
				verifyMS = p.cost.VerifyRowsMS(n * w)
			}
			// Round k accepts the first j drafts while u < prob^j, u being
			// a golden-ratio sequence from a seeded start: a quasi-random
			// draw whose mean over a short request stays within a few
			// percent of the table, where independent draws at width 16
			// strayed by 10-20% over 200 tokens.
			u = math.Mod(u+goldenFrac, 1)
			k, pj := 0, prob
			if profile != nil { // accept the first k drafts while u < S(k)
				for k < w-1 && u < profileAt(profile, k+1) {
					k++
				}
			} else {
				for k < w-1 && u < pj {
					k++
					pj *= prob
				}
			}
			emitted := min(1+k, left)
			acc := emitted - 1
			for i := range acc {
				res.PerPos[i]++
			}
			switch acc {
			case 0:
				res.ZeroAccept++
			case w - 1:
				res.FullAccept++
			default:
				res.Partial++
			}
			f := factor()
			res.DraftMS += draftMS * f
			res.VerifyMS += verifyMS * f
			if err := wait((draftMS + verifyMS) * f); err != nil {
				return res, err
			}
			res.Rounds++
			res.Proposed += w - 1
			res.Accepted += acc
			left -= emitted
			if err := burst(emitted); err != nil {
				return res, err
			}
		}
	} else {
		for ; left > 0; left-- {
			step := p.cost.ClassicMS
			if n := p.together(); n > 1 {
				step = p.cost.VerifyRowsMS(n)
			}
			if err := wait(step * factor()); err != nil {
				return res, err
			}
			if err := burst(1); err != nil {
				return res, err
			}
		}
	}
	res.PredictedMS = ms(clk.Now().Sub(first))
	return res, nil
}

// goldenFrac is the fractional part of the golden ratio.
const goldenFrac = 0.6180339887498949

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
