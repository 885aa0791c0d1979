package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/speclaunch/speclaunch/internal/evidence"
	"github.com/speclaunch/speclaunch/internal/record"
)

// loadProgress shows a load sweep as it runs: a bar of the (arm, engine,
// level) steps done, the last step's rate and the time left. On a
// terminal one line is rewritten; elsewhere each step is a line; with
// JSON each is an object.
type loadProgress struct {
	w           io.Writer
	json, tty   bool
	now         func() time.Time
	start       time.Time
	done, total int
	levels      int
	step        time.Duration // planned time of one step, for the first estimate
	lastLen     int
}

func newLoadProgress(o LoadOptions) *loadProgress {
	return &loadProgress{w: o.Progress, json: o.JSONProgress, tty: o.IsTTY && !o.JSONProgress, now: time.Now,
		total: len(o.Arms) * o.Engines * len(o.Levels), levels: len(o.Levels), step: o.Warm + time.Duration(o.Windows)*o.Window}
}

func (p *loadProgress) on() bool { return p != nil && p.w != nil }

func (p *loadProgress) emit(v map[string]any) {
	b, err := json.Marshal(v)
	if err == nil {
		_, _ = p.w.Write(append(b, '\n'))
	}
}

// left is the time left: the mean step so far (engine starts included)
// times the steps left; before any step, the planned step time.
func (p *loadProgress) left() time.Duration {
	per := p.step
	if p.done > 0 {
		per = p.now().Sub(p.start) / time.Duration(p.done)
	}
	return per * time.Duration(max(0, p.total-p.done))
}

func (p *loadProgress) begin(o LoadOptions) {
	p.start = p.now()
	if !p.on() {
		return
	}
	if p.json {
		p.emit(map[string]any{"event": "start", "arms": len(o.Arms), "levels": o.Levels, "engines_per_arm": o.Engines, "steps": p.total, "estimate_s": o.Estimate().Seconds()})
		return
	}
	p.line(fmt.Sprintf("load sweep: %d arms × %d engines × levels %s; about %s", len(o.Arms), o.Engines, joinInts(o.Levels), o.Estimate().Round(time.Second)), true)
}

func (p *loadProgress) starting(a ArmSpec, engine int) {
	if p.on() && !p.json {
		p.line(p.bar()+fmt.Sprintf(" starting %s engine %d", shortLabel(armLabel(a)), engine), false)
	}
}

func (p *loadProgress) level(a ArmSpec, engine, clients int, runs []record.Run) {
	p.done++
	if !p.on() {
		return
	}
	rate := evidence.Median(evidence.Rates(&record.Arm{Runs: runs}))
	if p.json {
		p.emit(map[string]any{"event": "level", "arm": armLabel(a), "engine": engine, "clients": clients, "tok_s": round1(rate), "done": p.done, "steps": p.total, "left_s": p.left().Round(time.Second).Seconds()})
		return
	}
	p.line(p.bar()+fmt.Sprintf(" %s engine %d, %d %s: %.1f tok/s; %s left", shortLabel(armLabel(a)), engine, clients, Plural(clients, "client", "clients"), rate, p.left().Round(time.Second)), !p.tty)
}

// skip counts the steps of an arm that failed as done.
func (p *loadProgress) skip() { p.done += p.levels }

func (p *loadProgress) armFailed(a ArmSpec, err error) {
	p.skip()
	if !p.on() {
		return
	}
	if p.json {
		p.emit(map[string]any{"event": "arm_failed", "arm": armLabel(a), "error": err.Error()})
		return
	}
	p.line(fmt.Sprintf("%s failed to start: %v", armLabel(a), err), true)
}

func (p *loadProgress) finish(rec *record.Record, err error) {
	if !p.on() {
		return
	}
	took := p.now().Sub(p.start).Round(time.Second)
	if p.json {
		v := map[string]any{"event": "finish", "complete": err == nil, "took_s": took.Seconds()}
		if rec.Earned != nil {
			v["schedule"] = rec.Earned.Text
		}
		p.emit(v)
		return
	}
	msg := fmt.Sprintf("load sweep done in %s", took)
	if err != nil {
		msg = fmt.Sprintf("load sweep stopped after %s: %v", took, err)
	}
	p.line(msg, true)
}

// bar is "[#####.....] 12/36".
func (p *loadProgress) bar() string {
	const width = 20
	n := 0
	if p.total > 0 {
		n = min(width, p.done*width/p.total)
	}
	return fmt.Sprintf("[%s%s] %d/%d", strings.Repeat("#", n), strings.Repeat(".", width-n), p.done, p.total)
}

func (p *loadProgress) line(s string, permanent bool) {
	if p.tty {
		pad := ""
		if d := p.lastLen - len(s); d > 0 {
			pad = strings.Repeat(" ", d)
		}
		end := ""
		if permanent {
			end = "\n"
		}
		fmt.Fprintf(p.w, "\r%s%s%s", s, pad, end)
		p.lastLen = len(s)
		if permanent {
			p.lastLen = 0
		}
		return
	}
	fmt.Fprintln(p.w, s)
}

func armLabel(a ArmSpec) string {
	if a.Label != "" {
		return a.Label
	}
	if a.Kind == KindWidth {
		return fmt.Sprintf("width %d", a.Width)
	}
	return a.Kind
}
