package bench

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/speclaunch/speclaunch/internal/evidence"
	"github.com/speclaunch/speclaunch/internal/record"
)

// RenderMarkdown renders the human record. It is a pure function of rec
// (golden-tested), so the .md and its .json twin can never disagree. The
// sections are written in the order a reader needs them: what was
// decided, on what, how it was measured, then the evidence.
func RenderMarkdown(rec *record.Record) []byte {
	if len(rec.Levels) > 0 {
		return renderLoadMarkdown(rec)
	}
	md := &mdWriter{rec: rec, order: byWidth(rec)}
	md.header()
	md.verdict()
	md.policyEntry()
	md.hostAndEngine()
	md.models()
	md.method()
	md.results()
	md.resultNotes()
	md.failedLogs()
	md.comparisons()
	md.perPrompt()
	md.costSide()
	md.probeCheck()
	md.acceptanceSide()
	md.drift()
	md.notes()
	md.rawRuns()
	return md.Bytes()
}

// mdWriter holds the record being rendered and the arm order the
// per-width tables share, so each section is a short method.
type mdWriter struct {
	bytes.Buffer
	rec   *record.Record
	order []int // arm indexes, classic first, then by width (byWidth)
}

// w is Fprintf to the record, short because every line of it calls it.
func (md *mdWriter) w(format string, a ...any) { fmt.Fprintf(md, format, a...) }

// header writes the title and the banners a reader must see before any
// figure: simulated, interrupted, transcribed.
func (md *mdWriter) header() {
	rec := md.rec
	title := rec.Title
	if title == "" {
		title = DefaultTitle(rec)
	}
	md.w("# %s\n\n", title)
	if rec.Simulated {
		md.w("> **SIMULATED: not a measurement; cannot back a policy entry.** The engine was the built-in simulator: its tokens are synthetic and its speed follows a cost model.\n\n")
	}
	if !rec.Complete {
		md.w("> **INCOMPLETE (interrupted).** The run stopped before every round finished; the figures cover what ran.\n\n")
	}
	if rec.Transcribed != nil {
		md.w("> Transcribed from %s (%s). %s\n\n", rec.Transcribed.Source, rec.Transcribed.Date, rec.Transcribed.Note)
	}
	md.w("Key: `engine=%s drafter=%s capability=%s quant=%s`. Date: %s. Written by %s (record schema %d).\n\n",
		rec.Key.Engine, rec.Key.Drafter, rec.Key.Capability, rec.Key.Quant, rec.Date, orDash(rec.Launcher), rec.Schema)
}

// verdict writes the decision first, so a reader who stops here knows it.
func (md *mdWriter) verdict() {
	rec := md.rec
	v := rec.Verdict
	md.w("## Verdict\n\n")
	if v.Best > 0 {
		md.w("- best: width %d (%s)\n", v.Best, v.BestLabel)
	} else {
		md.w("- best: none (no width beat classic with disjoint ranges)\n")
	}
	md.w("- runner-up: %s\n", widthOrDash(v.RunnerUp))
	md.w("- default: %s\n", widthOrDash(v.DefaultWidth))
	if v.EntryWidth > 0 && v.EntryWidth != v.Best {
		md.w("- entry width: %d (the best-ranked width that also beats the engine's default with probability >= %.2f)\n", v.EntryWidth, evidence.Level)
	}
	md.w("- why: %s\n", v.Why)
	// An arm that failed was not measured: the verdict above is about the
	// other arms only, and a reader must see that before the tables.
	for _, a := range rec.Arms {
		if a.Status == record.StatusFailed {
			md.w("- failed, not measured: %s (%s)\n", a.Label, orDash(a.StatusReason))
		}
	}
	if v.CrossPair != "" {
		md.w("- policy: %s\n", v.CrossPair)
	}
	if fr := rec.FirstRound; fr != nil {
		md.w("- first round: %s\n", fr.Verdict)
	}
}

// policyEntry writes the entry the record earns, or why it earns none.
func (md *mdWriter) policyEntry() {
	md.w("\n## Policy entry\n\n%s\n", EntryVerdict(md.rec))
	if v := md.rec.Verdict; v.EarnsEntry {
		md.w("\n```toml\n%s```\n", v.Entry)
	}
	md.w("\n")
}

// EntryVerdict says what a record earns in a policy entry, in the words
// of its markdown, which bench prints too: that it earns one (the
// verdict's Entry follows), or why it earns none; "" for a load sweep
// that earned no schedule, whose Why says so.
func EntryVerdict(rec *record.Record) string {
	v := rec.Verdict
	switch {
	case v.EarnsEntry:
		return "This record earns a policy entry; after committing the record, add it to policy.toml:"
	case len(rec.Levels) == 0:
		return "No policy entry is earned: " + orDash(v.NoEntryReason) + "."
	case v.NoEntryReason != "":
		return "It backs no embedded policy entry: " + v.NoEntryReason + ". A tuned user layer may still carry it (docs/schedule.md)."
	}
	return ""
}

// hostAndEngine writes what the figures were measured on, as key: value
// blocks that leave out what was not known.
func (md *mdWriter) hostAndEngine() {
	h, e := md.rec.Host, md.rec.Engine
	md.w("## Host\n\n```text\n")
	kv(&md.Buffer, "hostname", h.Hostname)
	kv(&md.Buffer, "kernel", h.Kernel)
	kv(&md.Buffer, "arch", h.Arch)
	kv(&md.Buffer, "gpu", h.GPU)
	kv(&md.Buffer, "gpu_count", intOrEmpty(h.GPUCount))
	kv(&md.Buffer, "driver", h.Driver)
	kv(&md.Buffer, "capability", h.Capability)
	md.w("```\n\n")

	md.w("## Engine and models\n\n```text\n")
	kv(&md.Buffer, "engine", e.Name)
	kv(&md.Buffer, "binary", e.Binary)
	kv(&md.Buffer, "version", e.Version)
	kv(&md.Buffer, "pin", e.Pin)
	kv(&md.Buffer, "sha256", e.SHA256)
	kv(&md.Buffer, "flag_spelling", e.Spelling)
	md.w("```\n\n")
}

// models writes the model files with their content hashes, so a reader
// can tell whether two records ran the same weights.
func (md *mdWriter) models() {
	if len(md.rec.Models) == 0 {
		return
	}
	md.w("| role | path | bytes | content sha256 | quant | kind | note |\n|---|---|---|---|---|---|---|\n")
	var methods []string // each once, with the role of each that is not the first's
	for _, m := range md.rec.Models {
		content := "—"
		if m.Content != "" {
			content = "`" + short(m.Content) + "`"
			switch {
			case len(methods) == 0:
				methods = append(methods, "Content hash: "+m.ContentMethod)
			case !strings.HasSuffix(methods[0], ": "+m.ContentMethod):
				methods = append(methods, "Content hash of the "+m.Role+": "+m.ContentMethod)
			}
		}
		path := "—" // a drafter that is the target's own layers has none
		if m.Path != "" {
			path = "`" + m.Path + "`"
		}
		md.w("| %s | %s | %s | %s | %s | %s | %s |\n", cell(m.Role), path, intOrDash64(m.Bytes), content, orDash(m.Quant), orDash(m.Kind), cell(m.Note))
	}
	md.w("\n")
	for _, m := range methods {
		md.w("%s.\n\n", m)
	}
}

// method writes how the figures were taken: schedule, prompts, decoding,
// concurrency and the harness's own cost.
func (md *mdWriter) method() {
	m := md.rec.Method
	md.w("## Method\n\n")
	md.w("- schedule: %s, %d rounds, %d discarded warm-up request(s) per server start, %d tokens per request\n", m.Schedule, m.Rounds, m.Warmup, m.MaxTokens)
	if len(m.Prompts) > 0 {
		md.w("- prompt set: `%s`, %d prompts:", orDash(m.PromptSet), len(m.Prompts))
		for _, p := range m.Prompts {
			md.w(" `%s` (%d bytes, sha256 `%s`)", p.Name, p.Bytes, short(p.SHA256))
		}
		md.w("\n")
	} else {
		md.w("- prompt: `%s` (sha256 `%s`)\n", orDash(m.Prompt), orDash(m.PromptSHA))
	}
	switch m.Sampling {
	case "sampled":
		md.w("- decoding: sampled at temperature %g, %s\n", m.Temperature, m.SeedRule)
	default:
		md.w("- decoding: greedy (temperature 0, top_k 1): acceptance is deterministic, so rounds measure timing jitter\n")
	}
	if m.Concurrency > 1 {
		md.w("- concurrency: %d requests in flight per measured run (aggregate tokens/s); engine slots: %s (%s)\n", m.Concurrency, intOrDash(m.Slots), orDash(m.SlotsFrom))
	} else {
		md.w("- concurrency: 1 (one request at a time)\n")
	}
	if b := m.Bootstrap; b != nil {
		md.w("- comparisons: bootstrap of medians, %d resamples, seed %d; units: %s\n", b.Resamples, b.Seed, b.Units)
	}
	md.w("- endpoint: `%s`, body `%s`\n", orDash(m.Endpoint), orDash(m.RequestBody))
	md.w("- widths: %s\n", joinInts(m.Widths))
	if m.WallS > 0 {
		md.w("- harness CPU: %.2f s over %.0f s of wall time (%.2f%%; the launcher's own process, engines excluded)\n", m.HarnessCPUS, m.WallS, 100*m.HarnessCPUS/m.WallS)
	}
	if m.RequestWallS > 0 {
		md.w("- harness CPU during the measured requests: %.2f s over %.1f s (%.2f%%)\n", m.RequestCPUS, m.RequestWallS, 100*m.RequestCPUS/m.RequestWallS)
	}
	if m.Description != "" {
		md.w("\n%s\n", m.Description)
	}
	md.w("\n")
}

// results writes one row per arm in the record's own order; a failed or
// not-measured arm says so in the cells a reader would otherwise trust.
func (md *mdWriter) results() {
	rec := md.rec
	classic := (*record.Arm)(nil)
	if ci := classicIndex(rec); ci >= 0 {
		classic = &rec.Arms[ci]
	}
	md.w("## Results\n\n")
	md.w("Tokens/s are end to end. An arm beats classic only when its whole range lies above classic's (all of classic's samples, both brackets). ")
	md.w("Paired Δ compares each measured request with the mean of the same round's two classic samples.\n\n")
	md.w("| arm | n | min | median | max | mean | speedup | range vs classic | paired Δ vs classic (median) | acceptance | mean accepted len | ms/cycle | engine tok/s (median) | identical to classic |\n")
	md.w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i := range rec.Arms {
		a := &rec.Arms[i]
		md.w("| %s |", cell(armName(a)))
		if a.Status == record.StatusFailed && a.Stats.N == 0 {
			md.w(" 0 | — | — | — | — | FAILED (%s) | — | — | — | — | — | — | — |\n", cell(a.StatusReason))
			continue
		}
		s := a.Stats
		md.w(" %d | %s | %s | %s | %s |", s.N, f1(s.Min), f1(s.Median), f1(s.Max), f1(s.Mean))
		switch {
		case a.Kind == KindClassic:
			md.w(" 1.00x | — | — | — | — |")
		case a.Status == record.StatusNotMeasurement:
			md.w(" NOT A MEASUREMENT (%s) | — | — | — | — |", cell(a.StatusReason))
		case a.Status == record.StatusFailed:
			md.w(" FAILED (%s) | — | — | — | — |", cell(a.StatusReason))
		default:
			md.w(" %s | %s | %s | %s | %s |", speedup(a), orDash(a.RangeVsClassic), paired(a.PairedDeltas), acceptanceCell(a.Acceptance), f2(a.Acceptance.MeanAccepted))
		}
		md.w(" %s | %s | %s |\n", f2(a.Cost.MSPerCycle), f1(a.EngineRate.Median), identicalCell(a, classic))
	}
	md.w("\n")
}

// resultNotes writes the notes on measured arms under the results table.
func (md *mdWriter) resultNotes() {
	notes := 0
	for i := range md.rec.Arms {
		a := &md.rec.Arms[i]
		if a.Status == record.StatusOK && a.StatusReason != "" {
			md.w("- %s: %s\n", armName(a), a.StatusReason)
			notes++
		}
		if a.IdentityNote != "" {
			md.w("- %s: %s\n", armName(a), a.IdentityNote)
			notes++
		}
	}
	if notes > 0 {
		md.w("\n")
	}
}

// failedLogs writes the engine's last log lines for each arm that failed,
// so the record says why without the run's console.
func (md *mdWriter) failedLogs() {
	for i := range md.rec.Arms {
		a := &md.rec.Arms[i]
		if a.Status == record.StatusFailed && len(a.LastLog) > 0 {
			md.w("%s failed: %s. Last log lines:\n\n```text\n%s\n```\n\n", armName(a), a.StatusReason, strings.Join(a.LastLog, "\n"))
		}
	}
}

// comparisons writes the bootstrap intervals, present only when the
// record ran the bootstrap.
func (md *mdWriter) comparisons() {
	if md.rec.Method.Bootstrap == nil {
		return
	}
	md.w("## Comparisons with stated uncertainty\n\n")
	md.w("Median against classic's and against the default arm's (the engine's own default width), with the central 95%% of the bootstrap's resampled ratios and the share of resamples in which the arm's median is higher. An entry needs P(better than the default) >= %.2f in every record it rests on.\n\n", evidence.Level)
	md.w("| arm | width | vs classic (95%% interval) | P(better than classic) | vs default (95%% interval) | P(better than default) |\n|---|---|---|---|---|---|\n")
	for _, i := range md.order {
		a := &md.rec.Arms[i]
		if a.Kind == KindClassic || (a.VsClassic == nil && a.VsDefault == nil) {
			continue
		}
		vc, pc, vd, pd := "—", "—", "—", "—"
		if c := a.VsClassic; c != nil {
			vc, pc = fmt.Sprintf("%.3fx (%.3f–%.3f)", c.Ratio, c.Lo, c.Hi), fmt.Sprintf("%.3f", c.PBetter)
		}
		if c := a.VsDefault; c != nil {
			vd, pd = fmt.Sprintf("%.3fx (%.3f–%.3f)", c.Ratio, c.Lo, c.Hi), fmt.Sprintf("%.3f", c.PBetter)
		} else if a.Kind == KindDefault {
			vd = "the default"
		}
		md.w("| %s | %s | %s | %s | %s | %s |\n", cell(armName(a)), widthCell(a), vc, pc, vd, pd)
	}
	md.w("\n")
}

// perPrompt writes each arm's median per prompt, present only when the
// record ran more than one prompt, since the results table pools them.
func (md *mdWriter) perPrompt() {
	prompts := promptNames(md.rec)
	if len(prompts) == 0 {
		return
	}
	md.w("## Per prompt\n\nMedian end-to-end tokens/s per prompt (min–max); the results table pools them.\n\n| arm |")
	for _, p := range prompts {
		md.w(" `%s` |", p)
	}
	md.w("\n|---|%s\n", strings.Repeat("---|", len(prompts)))
	for _, i := range md.order {
		a := &md.rec.Arms[i]
		if len(a.ByPrompt) == 0 {
			continue
		}
		md.w("| %s |", cell(armName(a)))
		for _, p := range prompts {
			cellText := "—"
			for _, ps := range a.ByPrompt {
				if ps.Prompt == p {
					cellText = fmt.Sprintf("%.1f (%.1f–%.1f)", ps.Stats.Median, ps.Stats.Min, ps.Stats.Max)
				}
			}
			md.w(" %s |", cellText)
		}
		md.w("\n")
	}
	md.w("\n")
}

// costSide writes the time per draft+verify cycle, the half of the
// trade-off that belongs to the GPU and engine.
func (md *mdWriter) costSide() {
	md.w("## Cost side: time per draft+verify cycle\n\n")
	md.w("A property of GPU, engine and weight format. A cycle drafts W−1 tokens and verifies W rows; classic's cycle is one token.\n\n")
	md.w("| arm | width | verify rows | ms/cycle (median) | derived from |\n|---|---|---|---|---|\n")
	for _, i := range md.order {
		a := &md.rec.Arms[i]
		if a.Status == record.StatusFailed || a.Cost.MSPerCycle == 0 {
			continue
		}
		md.w("| %s | %s | %d | %s | %s |\n", cell(armName(a)), widthCell(a), a.Cost.VerifyRows, f2(a.Cost.MSPerCycle), cell(orDash(a.Cost.Method)))
	}
}

// probeCheck writes how well serve --adapt's verify-cost probe predicted
// the measured cycles, present only when the probe ran.
func (md *mdWriter) probeCheck() {
	pc := md.rec.ProbeCheck
	if pc == nil {
		return
	}
	md.w("\n## Verify-cost probe check\n\n")
	md.w("`serve --adapt` prices a width by probing the verify cost of W rows (prompt evaluation of W new tokens after a cached prefix) and taking the rest of a cycle as drafting. The probe ran on %s after its rounds (%d samples per row count, medians). %s.\n\n", cell(pc.Arm), pc.Reps, upperFirst(pc.Verdict))
	if len(pc.Check) == 0 {
		return
	}
	md.w("| width | probe ms (W rows) | measured ms/cycle | drafting ms per drafted token |\n|---|---|---|---|\n")
	for _, r := range pc.Check {
		wc, d := fmt.Sprint(r.Width), f2(r.DraftPerTokenMS)
		if r.Width == 1 {
			wc, d = "1 (classic)", "—"
		}
		md.w("| %s | %s | %s | %s |\n", wc, f2(r.ProbeMS), f2(r.CycleMS), d)
	}
}

// acceptanceSide writes tokens per cycle, the half of the trade-off that
// belongs to the model pair and the text.
func (md *mdWriter) acceptanceSide() {
	md.w("\n## Acceptance side: tokens per cycle\n\n")
	md.w("A property of the model pair and the text. Mean accepted length is emitted tokens per cycle (predicted_n / cycles); by position is the share of cycles that accepted draft position i.\n\n")
	md.w("| arm | width | acceptance (accepted/drafted) | mean accepted len | cycles | by position |\n|---|---|---|---|---|---|\n")
	for _, i := range md.order {
		a := &md.rec.Arms[i]
		if a.Kind == KindClassic || a.Status != record.StatusOK {
			continue
		}
		ac := a.Acceptance
		md.w("| %s | %s | %s | %s | %s | %s |\n", cell(armName(a)), widthCell(a), acceptanceCell(ac), f2(ac.MeanAccepted), intOrDash(ac.Cycles), byPos(ac.ByPosition))
	}
}

// drift writes whether the machine's speed moved during the run (classic
// first against classic last) and what the first round cost.
func (md *mdWriter) drift() {
	d := md.rec.Drift
	md.w("\n## Drift check\n\n")
	md.w("- classic first in each round: %s\n", rangeText(d.First))
	md.w("- classic last in each round: %s\n", rangeText(d.Last))
	md.w("- %s\n", d.Verdict)
	if fr := md.rec.FirstRound; fr != nil {
		md.w("\n## First round\n\n")
		md.w("A server's first requests can pay one-time costs (on the H200 records, 37-49 ms to the first token against 5-7 ms later). Round 1's first-token times against the later rounds':\n\n")
		md.w("- round 1: %.1f ms (median); later rounds: %.1f ms\n- %s\n", fr.TTFTMS, fr.LaterTTFTMS, fr.Verdict)
	}
}

// notes writes the record's free-text notes, when it has any.
func (md *mdWriter) notes() {
	if len(md.rec.Notes) == 0 {
		return
	}
	md.w("\n## Notes\n\n")
	for _, n := range md.rec.Notes {
		md.w("- %s\n", n)
	}
}

// rawRuns writes every request the figures rest on, so any figure above
// can be recomputed from the record alone.
func (md *mdWriter) rawRuns() {
	md.w("\n## Raw runs\n\n")
	md.w("| arm | round | phase | prompt | tok/s | wall s | TTFT s | tokens | engine tok/s | drafted / accepted | cycles | ms/cycle | text sha256 | error |\n")
	md.w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i := range md.rec.Arms {
		a := &md.rec.Arms[i]
		for j := range a.Runs {
			md.rawRun(a, &a.Runs[j])
		}
	}
}

// rawRun writes one request's row; a failed request keeps its error and
// no figures.
func (md *mdWriter) rawRun(a *record.Arm, r *record.Run) {
	phase := r.Phase
	if r.Bracket != "" {
		phase += " (" + r.Bracket + ")"
	}
	if r.Error != "" {
		md.w("| %s | %d | %s | %s | — | — | — | — | — | — | — | — | — | %s |\n", cell(armName(a)), r.Round, phase, orDash(r.Prompt), cell(r.Error))
		return
	}
	da := "—"
	if r.DraftN > 0 || r.DiagProposed > 0 {
		da = fmt.Sprintf("%d / %d", max(r.DraftN, r.DiagProposed), max(r.DraftAccepted, r.DiagAccepted))
	}
	cyc := intOrDash(r.Cycles)
	if r.Cycles > 0 && r.CyclesFrom != "" {
		cyc += " (" + r.CyclesFrom + ")"
	}
	md.w("| %s | %d | %s | %s | %s | %.3f | %.3f | %d | %s | %s | %s | %s | `%s` | |\n", cell(armName(a)), r.Round, phase, orDash(r.Prompt), f1(r.TokPerS),
		r.WallS, r.TTFTS, r.CompletionTokens, f1(r.PredictedPerS), da, cyc, f2(r.MSPerCycle), short(r.TextSHA256))
}

// promptNames lists the prompts the arms' per-prompt figures name, in the
// record's set order (nil for a one-prompt record).
func promptNames(rec *record.Record) []string {
	var out []string
	for _, p := range rec.Method.Prompts {
		out = append(out, p.Name)
	}
	if len(out) > 0 {
		return out
	}
	for i := range rec.Arms {
		for _, ps := range rec.Arms[i].ByPrompt {
			if !slices.Contains(out, ps.Prompt) {
				out = append(out, ps.Prompt)
			}
		}
	}
	return out
}

// byWidth orders arm indexes classic first, then by width, the default
// arm before an explicit arm of the same width.
func byWidth(rec *record.Record) []int {
	idx := make([]int, len(rec.Arms))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(x, y int) int {
		a, b := &rec.Arms[x], &rec.Arms[y]
		if (a.Kind == KindClassic) != (b.Kind == KindClassic) {
			if a.Kind == KindClassic {
				return -1
			}
			return 1
		}
		if wa, wb := effWidth(a), effWidth(b); wa != wb {
			return wa - wb
		}
		if (a.Kind == KindDefault) != (b.Kind == KindDefault) {
			if a.Kind == KindDefault {
				return -1
			}
			return 1
		}
		return 0
	})
	return idx
}

func armName(a *record.Arm) string {
	if a.EngineWidth > 0 && a.Kind != KindClassic && a.EngineWidth != a.Width {
		return fmt.Sprintf("%s (engine ran %d)", a.Label, a.EngineWidth)
	}
	return a.Label
}

func widthCell(a *record.Arm) string {
	if a.Kind == KindClassic {
		return "—"
	}
	return fmt.Sprint(effWidth(a))
}

func kv(b *bytes.Buffer, k, v string) {
	if v != "" {
		fmt.Fprintf(b, "%s: %s\n", k, v)
	}
}

func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

func f1(x float64) string {
	if x == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", x)
}

func f2(x float64) string {
	if x == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f", x)
}

func intOrDash(n int) string {
	if n == 0 {
		return "—"
	}
	return fmt.Sprint(n)
}

func intOrDash64(n int64) string {
	if n == 0 {
		return "—"
	}
	return fmt.Sprint(n)
}

func intOrEmpty(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprint(n)
}

func widthOrDash(w int) string {
	if w == 0 {
		return "—"
	}
	return fmt.Sprintf("width %d", w)
}

func joinInts(xs []int) string {
	if len(xs) == 0 {
		return "—"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

func speedup(a *record.Arm) string {
	if a.SpeedupVsClassic == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2fx", a.SpeedupVsClassic)
}

func paired(ds []float64) string {
	if len(ds) == 0 {
		return "—"
	}
	s := describe(ds)
	return fmt.Sprintf("%+.1f%% (%+.1f to %+.1f%%, n=%d)", s.Median*100, s.Min*100, s.Max*100, s.N)
}

func acceptanceCell(ac record.Acceptance) string {
	if ac.Drafted == 0 {
		return "—"
	}
	return fmt.Sprintf("%.3f (%d/%d)", ac.Rate, ac.Accepted, ac.Drafted)
}

func byPos(xs []float64) string {
	if len(xs) == 0 {
		return "—"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, " ")
}

func identicalCell(a, classic *record.Arm) string {
	if a == classic {
		return "ref"
	}
	if a.IdenticalToClassic == nil {
		return "—"
	}
	if *a.IdenticalToClassic {
		return "yes"
	}
	return fmt.Sprintf("no (from char %d, token %d)", a.FirstDiffChar, a.FirstDiffToken)
}

func rangeText(s record.Stats) string {
	if s.N == 0 {
		return "no samples"
	}
	return fmt.Sprintf("%.1f–%.1f tok/s (median %.1f, n=%d)", s.Min, s.Max, s.Median, s.N)
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// upperFirst starts a verdict written for the middle of a line as a sentence.
func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
