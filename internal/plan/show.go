package plan

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/speclaunch/speclaunch/engine"
	"github.com/speclaunch/speclaunch/internal/secret"
	"github.com/speclaunch/speclaunch/internal/width"
)

// Headline is the one-line answer, in mlxcel's vocabulary:
// "draft width 4 (measured default for sm_121 with an affine-quantized
// target; policy entry gb10-affine-dflash, mlx 81ba1c6a)".
func Headline(r width.Resolution) string {
	if len(r.Schedule) > 1 && !r.Schedule.IsFlat() {
		return scheduleHeadline(r)
	}
	if r.Source == width.Off {
		return "speculation off (" + r.Reason + ")"
	}
	s := fmt.Sprintf("draft width %d (%s", r.Width, r.Reason)
	if r.Entry != nil {
		s += fmt.Sprintf("; policy entry %s, %s", r.Entry.ID, r.Entry.Pin)
	}
	return s + ")"
}

// Headline is the plan's one-line answer: Headline of its resolution,
// except where the engine runs one width for a schedule of several
// (SGLang, a vLLM older than 0.24): then the width it runs, the
// schedule's at one request in flight, and why the others are not run.
func (p *Plan) Headline() string {
	r := p.Resolution
	if !p.RunsOneWidth() {
		return Headline(r)
	}
	sched := r.Schedule
	r.Schedule = nil
	return fmt.Sprintf("%s; %s runs one width at every load, the schedule's at one request in flight, not the schedule %s", Headline(r), p.Settings.Engine.Value, sched)
}

// RunsOneWidth reports a schedule of several widths on an engine that
// runs one width, the schedule's at one request in flight
// (engine.RunsOneWidth).
func (p *Plan) RunsOneWidth() bool {
	s := p.Resolution.Schedule
	return len(s) > 1 && !s.IsFlat() && engine.RunsOneWidth(p.Settings.Engine.Value, p.Facts.Caps)
}

// scheduleHeadline is the headline of a schedule of several widths:
// "width 6 at 1 request, 4 at 2-3, off at 4+ (measured default for sm_90
// with a Q4_0 target; policy entry X, llama.cpp d32676d, record R)".
func scheduleHeadline(r width.Resolution) string {
	reason := r.Reason
	if r.Source == width.Off && r.OnReason != "" {
		reason = r.OnReason
	}
	s := r.Schedule.Describe() + " (" + reason
	if e := r.Entry; e != nil {
		s += fmt.Sprintf("; policy entry %s, %s", e.ID, e.Pin)
		if !strings.Contains(reason, e.Record) { // a tuned entry's reason names it
			s += ", record " + e.RecordPath()
		}
	}
	return s + ")"
}

// ShellJoin renders argv for copy and paste, secrets masked; the launcher
// itself never uses a shell.
func ShellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range secret.MaskArgv(argv) {
		q[i] = ShellQuote(a)
	}
	return strings.Join(q, " ")
}

// ShellQuote quotes one word for a POSIX shell where it needs quoting.
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	if strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r == '/' || r == ':' || r == '=' || r == ',' || r == '+' || r == '@' ||
			(r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
	}) < 0 {
		return s
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		// A newline or tab inside '…' would split the logged command's
		// line: bash's $'…' says it in one line and pastes as the same
		// argument.
		var b strings.Builder
		b.WriteString("$'")
		for i, r := range s {
			switch {
			case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
				fmt.Fprintf(&b, `\x%02x`, s[i]) // a byte that is no UTF-8: the same byte back
			case r == '\\' || r == '\'':
				b.WriteByte('\\')
				b.WriteRune(r)
			case r == '\n':
				b.WriteString(`\n`)
			case r == '\t':
				b.WriteString(`\t`)
			case unicode.IsControl(r) && r < 0x80:
				fmt.Fprintf(&b, `\x%02x`, r)
			case unicode.IsControl(r):
				fmt.Fprintf(&b, `\u%04x`, r)
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('\'')
		return b.String()
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
