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
	// engineZ is this engine's draw of the between-engine random effect
	// (CostModel.Spread; simcost.EngineDraw).
	engineZ float64
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
	PromptMS            float64 // request start (slot acquired) to first token, as modeled
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
func decode(ctx context.Context, clk Clock, p plan, prompt string, n int, emit func([]token) error) (result, error) {
	d := newDecoder(ctx, clk, p, prompt, emit)
	err := d.run(n)
	d.res.Text = d.text.String()
	return d.res, err
}

// decoder is one request's decode in progress: the clock it waits on, the
// noise it draws, the tokens it has produced and the result so far.
type decoder struct {
	ctx       context.Context
	clk       Clock
	p         plan
	prompt    string
	emit      func([]token) error
	prefillMS float64
	noise     *rand.Rand
	start     time.Time
	deadline  time.Time // when the work waited for so far is done
	toks      *tokenStream
	text      strings.Builder
	res       result
}

// newDecoder prices the prefill (a cached prefix makes it a verify of the
// new rows) and seeds the request's noise from the server seed and the
// request number, so a rerun draws the same times.
func newDecoder(ctx context.Context, clk Clock, p plan, prompt string, emit func([]token) error) *decoder {
	d := &decoder{ctx: ctx, clk: clk, p: p, prompt: prompt, emit: emit}
	d.res.PromptN = countPromptTokens(prompt)
	d.prefillMS = float64(d.res.PromptN) * p.cost.PromptTokenMS
	if p.prompt != nil {
		d.res.PromptN, d.res.CacheN = p.prompt.New, p.prompt.Cached
		d.prefillMS = p.cost.VerifyRowsMS(p.prompt.New)
	}
	if p.width >= 2 {
		d.res.PerPos = make([]int, p.width-1)
	}
	d.noise = rand.New(rand.NewPCG(uint64(p.seed), p.reqNum))
	d.deadline = clk.Now()
	d.start = d.deadline
	d.toks = newTokenStream(prompt)
	return d
}

// run decodes n tokens: prefill yields the first, as in llama.cpp and
// mlxcel, then speculative rounds or classic steps the rest.
func (d *decoder) run(n int) error {
	if n <= 0 {
		return nil
	}
	if err := d.pickup(); err != nil {
		return err
	}
	if err := d.wait(d.prefillMS * d.factor()); err != nil {
		return err
	}
	first := d.deadline
	// The prefill's modeled time, not the clock's: a sleep of a few
	// milliseconds overshoots by up to about one on the host's timers, a
	// quarter of a short prefill, and the probe reads this as the verify
	// cost of that many rows. On profiles/demo-load.toml the controller
	// read rows 1-4 as 4.2 ms (the model: 3.2-4.0) and predicted width
	// 17 fastest at one client, where the model puts width 5 ahead of
	// 16 by 7.8 %. Where the model prices no prefill (a text prompt on a
	// cost without PromptTokenMS), the clock's, as before: an engine never
	// reports 0 for a prompt it evaluated, and the probe refuses a 0.
	// The decode is timed from the same instant, so that the two sum to
	// the request's time on the clock.
	if d.res.PromptMS = ms(first.Sub(d.start)); d.res.PromptMS <= 0 {
		first = d.clk.Now()
		d.res.PromptMS = ms(first.Sub(d.start))
	}
	if err := d.burst(1); err != nil {
		return err
	}
	var err error
	if d.p.width >= 2 {
		err = d.speculate(n - 1)
	} else {
		err = d.classic(n - 1)
	}
	if err != nil {
		return err
	}
	d.res.PredictedMS = ms(d.clk.Now().Sub(first))
	return nil
}

// factor is one draw of the cost noise, times the drift slowdown; never
// below 5% of the model's time.
func (d *decoder) factor() float64 {
	f := 1 + d.p.cost.Noise*d.noise.NormFloat64()
	return math.Max(0.05, f) * d.p.slow
}

// cycleMS is one round (a classic step below width 2) with the
// sequences decoding now, this engine's own effect included
// (CostModel.CycleMS, EngineFactor).
func (d *decoder) cycleMS(w int) float64 {
	n := d.p.together()
	return d.p.cost.CycleMS(w, n) * d.p.cost.EngineFactor(d.p.engineZ, w, n)
}

// pickup waits the rounds a request spends, with other sequences
// decoding, before the engine takes it (CostModel.PickupRounds): in
// flight for its client, outside the engine's own timings, so the
// request's start is moved past it.
func (d *decoder) pickup() error {
	n := d.p.together()
	if rounds := d.p.cost.PickupRounds(d.p.width, n); rounds > 0 {
		if err := d.wait(rounds * d.cycleMS(d.p.width)); err != nil {
			return err
		}
		d.start = d.deadline
	}
	return nil
}

// wait moves the deadline on by ms and sleeps until it.
func (d *decoder) wait(ms float64) error {
	d.deadline = d.deadline.Add(time.Duration(ms * float64(time.Millisecond)))
	return d.clk.Sleep(d.ctx, d.deadline.Sub(d.clk.Now()))
}

// burst produces the next k tokens and emits them together.
func (d *decoder) burst(k int) error {
	b := make([]token, k)
	for i := range b {
		b[i] = d.toks.next()
		d.res.Tokens = append(d.res.Tokens, b[i].ID)
		d.text.WriteString(b[i].Text)
	}
	d.res.PredictedN += k
	return d.emit(b)
}

// classic decodes left tokens one target step each; a step shared with
// other requests costs a verify over all their rows.
func (d *decoder) classic(left int) error {
	for ; left > 0; left-- {
		if err := d.wait(d.cycleMS(1) * d.factor()); err != nil {
			return err
		}
		if err := d.burst(1); err != nil {
			return err
		}
	}
	return nil
}

// speculate decodes left tokens in draft+verify rounds of the plan's
// width, counting what each round accepted the way engines report it.
func (d *decoder) speculate(left int) error {
	p, w := d.p, d.p.width
	u := rand.New(rand.NewPCG(uint64(p.seed)^hashPrompt(d.prompt), uint64(w))).Float64()
	prob := acceptProb(w, p.cost.EmittedPerVerify(w))
	profile := promptProfile(d.prompt)
	if profile == nil {
		profile = p.cost.Accept
	}
	draftMS := p.cost.DraftRoundMS(w)
	for left > 0 {
		verifyMS := d.cycleMS(w) - draftMS // the rows, the batch and the engine's effect
		// Round k accepts the first j drafts while u < prob^j, u being
		// a golden-ratio sequence from a seeded start: a quasi-random
		// draw whose mean over a short request stays within a few
		// percent of the table, where independent draws at width 16
		// strayed by 10-20% over 200 tokens.
		u = math.Mod(u+goldenFrac, 1)
		emitted := min(1+acceptedDrafts(u, prob, profile, w), left)
		acc := emitted - 1
		d.countRound(acc, w)
		f := d.factor()
		d.res.DraftMS += draftMS * f
		d.res.VerifyMS += verifyMS * f
		if err := d.wait((draftMS + verifyMS) * f); err != nil {
			return err
		}
		d.res.Rounds++
		d.res.Proposed += w - 1
		d.res.Accepted += acc
		left -= emitted
		if err := d.burst(emitted); err != nil {
			return err
		}
	}
	return nil
}

// acceptedDrafts is how many of a round's w−1 drafts the draw u accepts:
// the first k while u < S(k) on an acceptance profile, else while
// u < prob^k.
func acceptedDrafts(u, prob float64, profile []float64, w int) int {
	k, pj := 0, prob
	if profile != nil {
		for k < w-1 && u < profileAt(profile, k+1) {
			k++
		}
		return k
	}
	for k < w-1 && u < pj {
		k++
		pj *= prob
	}
	return k
}

// countRound adds a round that accepted acc of w−1 drafts to the
// by-position and zero/partial/full counts.
func (d *decoder) countRound(acc, w int) {
	for i := range acc {
		d.res.PerPos[i]++
	}
	switch acc {
	case 0:
		d.res.ZeroAccept++
	case w - 1:
		d.res.FullAccept++
	default:
		d.res.Partial++
	}
}

// goldenFrac is the fractional part of the golden ratio.
const goldenFrac = 0.6180339887498949

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
