package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// progress reports the run as it goes. It is written between requests,
// never during one, so it costs the measurement nothing.
type progress struct {
	w         io.Writer
	json, tty bool
	now       func() time.Time

	start       time.Time
	total, done int
	rounds      int
	lastLen     int
}

func newProgress(o Options) *progress {
	return &progress{w: o.Progress, json: o.JSONProgress, tty: o.IsTTY && !o.JSONProgress, now: time.Now, rounds: o.Rounds}
}

func (p *progress) on() bool { return p != nil && p.w != nil }

// emit writes one JSON object per line, "event" first so that a reader
// can dispatch on the line's start.
func (p *progress) emit(v map[string]any) {
	ev, _ := v["event"].(string)
	delete(v, "event")
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	head, _ := json.Marshal(ev)
	out := append([]byte(`{"event":`), head...)
	if len(b) > 2 {
		out = append(append(out, ','), b[1:]...)
	} else {
		out = append(out, '}')
	}
	_, _ = p.w.Write(append(out, '\n'))
}

func (p *progress) begin(arms int, schedule string, total int) {
	if p == nil {
		return
	}
	p.start, p.total = p.now(), total
	if !p.on() {
		return
	}
	if p.json {
		p.emit(map[string]any{"event": "start", "arms": arms, "rounds": p.rounds, "schedule": schedule, "requests": total})
		return
	}
	p.line(fmt.Sprintf("bench: %d arms, %d rounds, schedule %s, %d requests", arms, p.rounds, schedule, total), true)
}

// eta is the mean time per request so far (server starts included) times
// the requests left.
func (p *progress) eta() time.Duration {
	if p.done == 0 || p.total <= p.done {
		return 0
	}
	per := p.now().Sub(p.start) / time.Duration(p.done)
	return per * time.Duration(p.total-p.done)
}

// skip removes requests that will not run (an arm that failed).
func (p *progress) skip(n int) {
	if p != nil {
		p.total -= n
	}
}

func (p *progress) request(arm string, round int, phase string, tokS float64, errText string) {
	if p == nil {
		return
	}
	p.done++
	if !p.on() {
		return
	}
	eta := p.eta()
	if p.json {
		ev := map[string]any{"event": "request", "arm": arm, "round": round, "phase": phase,
			"tok_s": round1(tokS), "eta_s": round1(eta.Seconds()), "done": p.done, "total": p.total}
		if errText != "" {
			ev["error"] = errText
		}
		p.emit(ev)
		return
	}
	if phase != PhaseMeasured && !p.tty {
		return // plain output: one line per arm and round
	}
	what := fmt.Sprintf("%.1f tok/s", tokS)
	if errText != "" {
		what = "error: " + errText
	}
	if phase != PhaseMeasured {
		what = "warm-up " + what
	}
	p.line(fmt.Sprintf("round %d/%d  %-12s %s  (%d/%d requests, about %s left)", round, p.rounds, shortLabel(arm), what,
		p.done, p.total, eta.Round(time.Second)), !p.tty)
}

// probing says the verify-cost probe is running (Options.Probe).
func (p *progress) probing(arm string, rows []int) {
	if !p.on() {
		return
	}
	if p.json {
		p.emit(map[string]any{"event": "probe", "arm": arm, "rows": rows})
		return
	}
	p.line(fmt.Sprintf("bench: probing the verify cost on %s (rows %v)", shortLabel(arm), rows), true)
}

func (p *progress) armFailed(arm, errText string) {
	if !p.on() {
		return
	}
	if p.json {
		p.emit(map[string]any{"event": "arm_failed", "arm": arm, "error": errText})
		return
	}
	p.line(fmt.Sprintf("arm %s failed: %s", arm, errText), true)
}

func (p *progress) finish(complete bool, err error) {
	if !p.on() {
		return
	}
	el := p.now().Sub(p.start).Round(time.Second)
	if p.json {
		ev := map[string]any{"event": "done", "complete": complete, "elapsed_s": round1(p.now().Sub(p.start).Seconds()), "requests": p.done}
		if err != nil {
			ev["error"] = err.Error()
		}
		p.emit(ev)
		return
	}
	msg := fmt.Sprintf("bench: done, %d requests in %s", p.done, el)
	if !complete {
		msg = fmt.Sprintf("bench: interrupted after %d requests (%s): the record is incomplete", p.done, el)
	}
	p.line(msg, true)
}

// line writes a whole line, or on a TTY rewrites the current one; a
// permanent line on a TTY first ends the rewritten one.
func (p *progress) line(s string, permanent bool) {
	if !p.tty {
		fmt.Fprintln(p.w, s)
		return
	}
	pad := ""
	if n := p.lastLen - len(s); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	if permanent {
		fmt.Fprintf(p.w, "\r%s%s\n", s, pad)
		p.lastLen = 0
		return
	}
	fmt.Fprintf(p.w, "\r%s%s", s, pad)
	p.lastLen = len(s)
}

func round1(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }

// shortLabel drops an arm label's parenthesised reason ("default = 4
// (measured default for ...)") so that a progress line stays one line.
func shortLabel(l string) string {
	if i := strings.Index(l, " ("); i > 0 {
		return l[:i]
	}
	return l
}
