package bench

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/speclaunch/speclaunch/internal/evidence"
	"github.com/speclaunch/speclaunch/internal/record"
)

// Analyze recomputes every derived figure of rec (per-arm statistics,
// statuses that follow from the runs, cost and acceptance sides, greedy
// identity, the drift check and the verdict) from its raw runs. It is pure:
// Run calls it after measuring, and a record can be re-analysed from its
// .json alone. Statuses the harness set from outside the runs (failed to
// start, engine declined) are kept.
func Analyze(rec *record.Record) { analyze(rec, nil) }

// pieceIndex returns the streamed piece ends of arm a's run i when the
// harness still has them; nil otherwise.
type pieceIndex func(a, i int) []int32

// effWidth is the width that ran: the engine's report when it gave one.
func effWidth(a *record.Arm) int { return a.RanWidth() }

func measuredOK(r *record.Run) bool { return r.Measured() }

// drafted reports whether the engine says speculation ran for the run.
func drafted(r *record.Run) bool { return r.DraftN > 0 || r.DiagRounds > 0 }

// Run phases and classic brackets.
const (
	PhaseWarmup   = record.PhaseWarmup
	PhaseMeasured = record.PhaseMeasured
	BracketFirst  = record.BracketFirst
	BracketLast   = record.BracketLast
)

func classicIndex(rec *record.Record) int {
	for i := range rec.Arms {
		if rec.Arms[i].Kind == KindClassic {
			return i
		}
	}
	return -1
}

func analyze(rec *record.Record, pieces pieceIndex) {
	engineReports := false
	for i := range rec.Arms {
		for j := range rec.Arms[i].Runs {
			if r := &rec.Arms[i].Runs[j]; measuredOK(r) && drafted(r) {
				engineReports = true
			}
		}
	}
	for i := range rec.Arms {
		armOwn(&rec.Arms[i], engineReports)
	}
	ci := classicIndex(rec)
	var classic *record.Arm
	if ci >= 0 {
		classic = &rec.Arms[ci]
	}
	rec.Drift = evidence.Drift(classic)
	identity(rec, ci, pieces)
	if classic != nil && classic.Status == record.StatusOK {
		for i := range rec.Arms {
			if i != ci {
				versusClassic(&rec.Arms[i], classic)
			}
		}
	}
	for i := range rec.Arms {
		rec.Arms[i].ByPrompt = byPrompt(&rec.Arms[i])
	}
	compare(rec, classic)
	rec.FirstRound = firstRound(rec)
	checkProbe(rec)
	note := "the engine reported no draft counters for any arm: whether speculation ran could not be verified"
	if !engineReports && len(rec.Arms) > 1 && !slices.Contains(rec.Notes, note) {
		rec.Notes = append(rec.Notes, note)
	}
	rec.Verdict = verdict(rec)
}

// byPrompt splits an arm's measured rates by prompt when the record used a
// prompt set (nil otherwise), in the set's order.
func byPrompt(a *record.Arm) []record.PromptStats {
	var order []string
	rates := map[string][]float64{}
	for j := range a.Runs {
		r := &a.Runs[j]
		if !measuredOK(r) || r.Prompt == "" {
			continue
		}
		if _, ok := rates[r.Prompt]; !ok {
			order = append(order, r.Prompt)
		}
		rates[r.Prompt] = append(rates[r.Prompt], r.TokPerS)
	}
	if len(order) < 2 {
		return nil
	}
	out := make([]record.PromptStats, len(order))
	for i, p := range order {
		out[i] = record.PromptStats{Prompt: p, Stats: describe(rates[p])}
	}
	return out
}

// compare bootstraps every speculative arm's median against classic's and
// against the default arm's (package evidence states the method). The
// record is the bench's own, bounded by what it measured, so the bootstrap
// runs to the end.
func compare(rec *record.Record, classic *record.Arm) {
	def := rec.DefaultArm()
	if def != nil && (def.Status != record.StatusOK || def.Stats.N < 2) {
		def = nil
	}
	any := false
	for i := range rec.Arms {
		a := &rec.Arms[i]
		a.VsClassic, a.VsDefault = nil, nil
		if a.Kind == KindClassic || a.Status == record.StatusFailed || a.Stats.N < 2 {
			continue
		}
		if classic != nil && classic.Status == record.StatusOK {
			a.VsClassic, _ = evidence.CompareArms(context.Background(), a, classic, "classic")
		}
		if def != nil && a != def {
			a.VsDefault, _ = evidence.CompareArms(context.Background(), a, def, evidence.DefaultLabel(def))
		}
		any = any || a.VsClassic != nil || a.VsDefault != nil
	}
	if any {
		rec.Method.Bootstrap = evidence.Method()
	}
}

// firstRound compares round 1's first-token times with the later rounds':
// on the H200 records a server's first two or three requests took 37-49 ms
// to the first token against 5-7 ms afterwards, and one warm-up left that
// in round 1. Cold: round 1's median is more than twice the later rounds'
// and 5 ms or more above it.
func firstRound(rec *record.Record) *record.FirstRound {
	var first, later []float64
	for i := range rec.Arms {
		for j := range rec.Arms[i].Runs {
			r := &rec.Arms[i].Runs[j]
			if !measuredOK(r) || r.TTFTS <= 0 {
				continue
			}
			if r.Round == 1 {
				first = append(first, r.TTFTS*1000)
			} else if r.Round > 1 {
				later = append(later, r.TTFTS*1000)
			}
		}
	}
	if len(first) == 0 || len(later) == 0 {
		return nil
	}
	f := &record.FirstRound{TTFTMS: describe(first).Median, LaterTTFTMS: describe(later).Median}
	f.Cold = f.TTFTMS > 2*f.LaterTTFTMS && f.TTFTMS-f.LaterTTFTMS >= 5
	if f.Cold {
		f.Verdict = fmt.Sprintf("round 1 was cold: its first-token times (median %.1f ms) are %.1fx the later rounds' (%.1f ms); the servers' first requests paid one-time costs the warm-up did not absorb, which lowers round 1's rates and every arm's minimum (raise --warmup, or read round 1 apart)",
			f.TTFTMS, f.TTFTMS/f.LaterTTFTMS, f.LaterTTFTMS)
	} else {
		f.Verdict = fmt.Sprintf("round 1 was warm: first-token times %.1f ms (median) against %.1f ms in later rounds", f.TTFTMS, f.LaterTTFTMS)
	}
	return f
}

// armOwn fills what an arm's figures say on their own: stats, status,
// per-run cycles, the cost side and the acceptance side.
func armOwn(a *record.Arm, engineReports bool) {
	w := effWidth(a)
	var rates, engine []float64
	var ok []*record.Run
	var firstErr string
	measured := 0
	for j := range a.Runs {
		r := &a.Runs[j]
		if r.Phase != PhaseMeasured {
			continue
		}
		measured++
		if r.Error != "" {
			if firstErr == "" {
				firstErr = r.Error
			}
			continue
		}
		ok = append(ok, r)
		rates = append(rates, r.TokPerS)
		if r.PredictedPerS > 0 {
			engine = append(engine, r.PredictedPerS)
		}
		fillCycles(r, a.Kind, w)
	}
	a.Stats = describe(rates)
	a.EngineRate = describe(engine)

	if a.Status == "" || a.Status == record.StatusOK {
		a.Status, a.StatusReason = record.StatusOK, ""
		switch {
		case len(ok) == 0 && measured == 0:
			a.Status, a.StatusReason = record.StatusFailed, "no measured request ran"
		case len(ok) == 0:
			a.Status, a.StatusReason = record.StatusFailed, fmt.Sprintf("every measured request failed (%d of %d): %s", measured, measured, firstErr)
		case len(ok) < 2:
			a.Status, a.StatusReason = record.StatusFailed, fmt.Sprintf("only %d of %d measured requests succeeded (%s); %v", len(ok), measured, firstErr, evidence.ErrTooFewSamples)
		}
		if a.Status == record.StatusOK && a.Kind != KindClassic {
			n := 0
			for _, r := range ok {
				if drafted(r) {
					n++
				}
			}
			switch {
			case engineReports && n == 0:
				a.Status, a.StatusReason = record.StatusNotMeasurement, "no draft counters in any measured request (timings.draft_n absent or 0, no diagnostics rounds): speculation did not run"
			case engineReports && n < len(ok):
				a.StatusReason = fmt.Sprintf("%d of %d measured requests drafted nothing", len(ok)-n, len(ok))
			}
		}
		if a.Status == record.StatusOK && a.Kind != KindClassic && a.EngineWidth > 0 && a.EngineWidth != a.Width {
			a.StatusReason = joinNote(a.StatusReason, fmt.Sprintf("engine clamped/ran width %d, not the requested %d", a.EngineWidth, a.Width))
		}
	}
	a.Cost = evidence.ArmCost(a)
	a.Acceptance = acceptance(a, ok)
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// fillCycles completes a run's cycle count and cost (evidence.RunCycles).
func fillCycles(r *record.Run, kind string, w int) {
	r.Cycles, r.CyclesFrom, r.MSPerCycle = evidence.RunCycles(r, kind, w)
}

// acceptance sums the drafted and accepted counts over the measured runs.
// Mean accepted length is emitted tokens per cycle (predicted_n / cycles,
// so the one token the prompt pass emits is counted in; the engines' own
// "mean len", (accepted + cycles) / cycles, leaves it out and reads lower
// by about 1/cycles).
func acceptance(a *record.Arm, ok []*record.Run) record.Acceptance {
	if a.Kind == KindClassic {
		return record.Acceptance{}
	}
	var acc record.Acceptance
	tokens := 0
	var pos []int
	posCycles := 0
	for _, r := range ok {
		d, ac := r.DraftN, r.DraftAccepted
		if d == 0 && r.DiagProposed > 0 {
			d, ac = r.DiagProposed, r.DiagAccepted
		}
		acc.Drafted += d
		acc.Accepted += ac
		if r.Cycles > 0 {
			acc.Cycles += r.Cycles
			tokens += r.CompletionTokens
		}
		if len(r.AcceptedByPos) > 0 && r.Cycles > 0 {
			for len(pos) < len(r.AcceptedByPos) {
				pos = append(pos, 0)
			}
			for i, v := range r.AcceptedByPos {
				pos[i] += v
			}
			posCycles += r.Cycles
		}
	}
	if acc.Drafted > 0 {
		acc.Rate = float64(acc.Accepted) / float64(acc.Drafted)
	}
	if acc.Cycles > 0 {
		acc.MeanAccepted = float64(tokens) / float64(acc.Cycles)
	}
	if posCycles > 0 {
		acc.ByPosition = make([]float64, len(pos))
		for i, v := range pos {
			acc.ByPosition[i] = float64(v) / float64(posCycles)
		}
	}
	return acc
}

func versusClassic(a, classic *record.Arm) {
	a.SpeedupVsClassic, a.BeatsClassic, a.RangeVsClassic, a.PairedDeltas = 0, false, "", nil
	if a.Stats.N == 0 || a.Status == record.StatusFailed {
		return
	}
	if classic.Stats.Median > 0 {
		a.SpeedupVsClassic = a.Stats.Median / classic.Stats.Median
	}
	a.RangeVsClassic = evidence.CompareRange(a.Stats, classic.Stats)
	a.BeatsClassic = a.Status == record.StatusOK && evidence.BeatsClassic(a.Stats, classic.Stats)
	byRound := map[int][]float64{}
	for j := range classic.Runs {
		if r := &classic.Runs[j]; measuredOK(r) {
			byRound[r.Round] = append(byRound[r.Round], r.TokPerS)
		}
	}
	for j := range a.Runs {
		r := &a.Runs[j]
		if !measuredOK(r) {
			continue
		}
		if d, ok := PairedDelta(r.TokPerS, byRound[r.Round]); ok {
			a.PairedDeltas = append(a.PairedDeltas, d)
		}
	}
}

// identity compares every measured text with classic's first measured text.
// FirstDiffChar is the rune index of the first difference in the first
// differing run; FirstDiffToken is the index of the streamed piece that
// holds that character (the engines stream one token per content event
// outside drafted bursts' joins, so pieces are tokens to within the
// engine's grouping). Without the piece boundaries (a re-analysis from
// .json) it is estimated as the character's share of the token count.
func identity(rec *record.Record, ci int, pieces pieceIndex) {
	refs := map[string]string{} // by prompt
	if ci >= 0 {
		for j := range rec.Arms[ci].Runs {
			if r := &rec.Arms[ci].Runs[j]; measuredOK(r) {
				if _, ok := refs[r.Prompt]; !ok {
					refs[r.Prompt] = r.Text
				}
			}
		}
	}
	// Sampled text is not expected to match classic's: speculative
	// sampling keeps the distribution, not the bytes.
	sampled := rec.Method.Sampling == "sampled"
	for i := range rec.Arms {
		a := &rec.Arms[i]
		a.IdenticalToClassic, a.FirstDiffToken, a.FirstDiffChar, a.IdentityNote = nil, 0, 0, ""
		if i == ci || len(refs) == 0 || sampled || a.Status == record.StatusFailed {
			continue
		}
		same, any := true, false
		for j := range a.Runs {
			r := &a.Runs[j]
			ref, found := refs[r.Prompt]
			if !measuredOK(r) || !found {
				continue
			}
			any = true
			if r.Text == ref {
				continue
			}
			same = false
			byteAt := commonPrefix(r.Text, ref)
			a.FirstDiffChar = utf8.RuneCountInString(r.Text[:byteAt])
			a.FirstDiffToken = tokenAt(r, byteAt, piecesOf(pieces, i, j))
			switch {
			case byteAt == len(r.Text):
				a.IdentityNote = "text is a prefix of classic's: the stream ended early (old llama.cpp trees drop a drafted stream's last events)"
			case byteAt == len(ref):
				a.IdentityNote = "classic's text is a prefix of this arm's"
			}
			break
		}
		if !any {
			continue
		}
		v := same
		a.IdenticalToClassic = &v
		if same {
			a.FirstDiffToken, a.FirstDiffChar = -1, -1
		}
	}
}

func piecesOf(p pieceIndex, a, i int) []int32 {
	if p == nil {
		return nil
	}
	return p(a, i)
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	// back up to a rune boundary so the character index is whole
	for i > 0 && i < len(a) && !utf8.RuneStart(a[i]) {
		i--
	}
	return i
}

func tokenAt(r *record.Run, byteAt int, ends []int32) int {
	if len(ends) > 0 {
		for k, e := range ends {
			if int(e) > byteAt {
				return k
			}
		}
		return len(ends)
	}
	if len(r.Text) == 0 {
		return 0
	}
	return byteAt * r.CompletionTokens / len(r.Text)
}

// verdict ranks the widths and decides whether the record earns an entry
// by the rule of package evidence (Judge, and Choose over this one
// record). Each width is ranked by its representative arm
// (record.Representative), so a record that measured one width under two
// names reports each figure for the arm it belongs to.
func verdict(rec *record.Record) record.Verdict {
	prev := rec.Verdict
	v := record.Verdict{PolicyWidth: prev.PolicyWidth, PolicyEntry: prev.PolicyEntry}
	ev := evidence.Of(rec)
	if ev.Default != nil {
		v.DefaultWidth = ev.Default.RanWidth()
	}
	switch c := ev.Classic; {
	case c == nil:
		v.Why = "no classic arm: nothing to compare against"
	case c.Status != record.StatusOK:
		v.Why = "the classic arm failed (" + c.StatusReason + "): nothing to compare against"
	}
	if v.Why != "" {
		v.NoEntryReason = v.Why
		return v
	}
	ctx := context.Background() // the bench's own record: bounded by what it measured
	d, _ := evidence.Choose(ctx, []*evidence.Evidence{ev})
	why := rankingWhy(ctx, ev, &v)
	why = append(why, caveats(rec)...)
	v.Why = strings.Join(why, "; ") + "."
	v.CrossPair = crossPair(v)
	if no := noEntry(ev, v); len(no) > 0 {
		v.NoEntryReason = strings.Join(no, "; ")
		return v
	}
	v.EarnsEntry = true
	v.Entry = EntryBlock(rec, d.Width, d.RunnerUp)
	return v
}

// rankingWhy fills the verdict's best width, runner-up and entry width,
// and says why: the best width that beats classic, the next-ranked width,
// how the best compares with the default, and the fallback when the best
// does not beat the default.
func rankingWhy(ctx context.Context, ev *evidence.Evidence, v *record.Verdict) []string {
	ranked := ev.Ranked()
	cm := ev.Classic.Stats
	var winners []*evidence.Arm
	for _, a := range ranked {
		if ev.BeatsClassic(a) {
			winners = append(winners, a)
		}
	}
	if len(winners) == 0 {
		msg := "no width beat classic with disjoint ranges"
		if len(ranked) > 0 {
			f := ranked[0]
			msg += fmt.Sprintf("; the fastest median was width %d at %.1f tok/s (%.2fx classic's %.1f, range %s)",
				f.RanWidth(), f.Stats.Median, f.SpeedupVsClassic, cm.Median, f.RangeVsClassic)
		}
		return []string{msg}
	}
	b := winners[0]
	v.Best, v.BestLabel = b.RanWidth(), b.Label
	why := []string{fmt.Sprintf("width %d ran %.1f tok/s median, %.2fx classic's %.1f, its min %.1f above classic's max %.1f",
		b.RanWidth(), b.Stats.Median, b.SpeedupVsClassic, cm.Median, b.Stats.Min, cm.Max)}
	for _, r := range ranked {
		if r.RanWidth() != v.Best {
			v.RunnerUp = r.RanWidth()
			why = append(why, fmt.Sprintf("runner-up width %d at %.1f (%.2fx, %s)", r.RanWidth(), r.Stats.Median, r.SpeedupVsClassic, r.RangeVsClassic))
			break
		}
	}
	def := ev.Default
	defOK := def != nil && def.Status == record.StatusOK && def.Stats.Median > 0
	if defOK && def.RanWidth() == v.Best {
		why = append(why, fmt.Sprintf("the best width is the engine's default (%d)", v.Best))
	} else if defOK {
		why = append(why, fmt.Sprintf("the default (width %d) ran %.1f: width %d is %s", def.RanWidth(), def.Stats.Median, v.Best, versusDefault(b.VsDefault)))
	}
	// The entry's width: the best-ranked width that passes every rule on
	// its figures (the record's own fitness is judged apart, in noEntry).
	var bestFails []string
	for _, a := range winners {
		j, _ := ev.Judge(ctx, a.RanWidth())
		fails := figureFails(j)
		if a == b {
			bestFails = fails
		}
		if len(fails) == 0 {
			v.EntryWidth = a.RanWidth()
			if a != b {
				why = append(why, fmt.Sprintf("width %d fails: %s; the next-ranked width that passes is %d (%s)", v.Best, strings.Join(bestFails, "; "),
					v.EntryWidth, versusDefault(j.VsDefault)))
			}
			return why
		}
	}
	if defOK {
		why = append(why, fmt.Sprintf("no width that beats classic beats the default with probability >= %.2f: %s", evidence.Level, strings.Join(bestFails, "; ")))
	}
	return why
}

// figureFails are the judgement's fails other than the record's own.
func figureFails(j evidence.Judgement) []string {
	var out []string
	for _, f := range j.Fails {
		if f.Rule != evidence.RuleRecord {
			out = append(out, f.Msg)
		}
	}
	return out
}

// caveats are what the reader must know about the run itself: arms that
// were not measurements, drift, a cold first round.
func caveats(rec *record.Record) []string {
	var out, nam []string
	for i := range rec.Arms {
		if a := &rec.Arms[i]; a.Kind != KindClassic && a.Status == record.StatusNotMeasurement {
			nam = append(nam, a.Label)
		}
	}
	if len(nam) > 0 {
		out = append(out, "not ranked, NOT A MEASUREMENT: "+strings.Join(nam, ", "))
	}
	if rec.Drift.Verdict != "" && !rec.Drift.Overlap {
		out = append(out, rec.Drift.Verdict)
	}
	if fr := rec.FirstRound; fr != nil && fr.Cold {
		out = append(out, fr.Verdict)
	}
	return out
}

// noEntry says why the record earns no entry (none: it earns one).
func noEntry(ev *evidence.Evidence, v record.Verdict) []string {
	var no []string
	def := ev.Default
	switch {
	case v.Best == 0:
		no = append(no, "no width beat classic with disjoint ranges")
	case def == nil || def.Status != record.StatusOK:
		no = append(no, "the record has no default arm that measured: an entry must beat the engine's default")
	case v.EntryWidth == 0:
		no = append(no, fmt.Sprintf("no width that beats classic also beats the engine's default (width %d) with probability >= %.2f", def.RanWidth(), evidence.Level))
	}
	no = append(no, ev.RecordFails()...)
	if k := ev.Rec.Key; k.Engine == "" || k.Drafter == "" || k.Capability == "" || k.Quant == "" {
		no = append(no, "the record's key is incomplete")
	}
	return no
}

// versusDefault renders an arm's bootstrap comparison with the default.
func versusDefault(c *record.Comparison) string {
	if c == nil {
		return "not compared with the default"
	}
	return fmt.Sprintf("%.2fx the default by median (95%% interval %.2f-%.2f, P(better) %.3f)", c.Ratio, c.Lo, c.Hi, c.PBetter)
}

// crossPair says plainly how the policy's own choice for the key (a
// cross-pair choice over several records) relates to this record's.
func crossPair(v record.Verdict) string {
	if v.PolicyWidth == 0 {
		return ""
	}
	name := "the policy's entry"
	if v.PolicyEntry != "" {
		name += " " + v.PolicyEntry
	}
	switch {
	case v.Best == 0:
		return fmt.Sprintf("%s sets width %d for this key; this record has no width that beats classic", name, v.PolicyWidth)
	case v.Best == v.PolicyWidth:
		return fmt.Sprintf("%s sets width %d for this key, this record's best too", name, v.PolicyWidth)
	}
	return fmt.Sprintf("%s sets width %d for this key (chosen across the records it rests on); this record's own best is width %d: the choices differ", name, v.PolicyWidth, v.Best)
}

// EntryID names an entry as policy.toml does: GPU, quantization, drafter
// ("h200-q4_0-draft", "gb10-affine-dflash").
func EntryID(rec *record.Record) string {
	gpu := strings.ToLower(rec.Host.GPU)
	gpu = strings.TrimPrefix(gpu, "nvidia ")
	gpu = strings.TrimPrefix(gpu, "geforce ")
	// the model's first word ("h200", "gb10", "a100" of "A100-SXM4-80GB"),
	// with the next one when the first is a family name ("rtx 4090")
	f := strings.FieldsFunc(gpu, func(r rune) bool { return r == ' ' || r == '-' || r == '_' })
	switch {
	case len(f) > 1 && !strings.ContainsAny(f[0], "0123456789"):
		gpu = f[0] + f[1]
	case len(f) > 0:
		gpu = f[0]
	}
	gpu = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, gpu)
	if gpu == "" {
		gpu = "sm" + strings.ReplaceAll(rec.Key.Capability, ".", "")
	}
	return gpu + "-" + rec.Key.Quant + "-" + rec.Key.Drafter
}

// EntryBlock renders the [[entry]] a record earns, ready for policy.toml.
func EntryBlock(rec *record.Record, width, runnerUp int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[[entry]]\n")
	fmt.Fprintf(&b, "id = %q\n", EntryID(rec))
	fmt.Fprintf(&b, "engine = %q\n", rec.Key.Engine)
	fmt.Fprintf(&b, "drafter = %q\n", rec.Key.Drafter)
	fmt.Fprintf(&b, "capability = %q\n", rec.Key.Capability)
	fmt.Fprintf(&b, "quant = %q\n", rec.Key.Quant)
	fmt.Fprintf(&b, "width = %d\n", width)
	if runnerUp > 0 {
		fmt.Fprintf(&b, "runner_up = %d\n", runnerUp)
	}
	fmt.Fprintf(&b, "pin = %q\n", rec.Engine.Pin)
	fmt.Fprintf(&b, "record = %q\n", path.Join("docs/benchmark_results", rec.Name+".md"))
	return b.String()
}
