package config

import (
	"fmt"
	"strings"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/schedule"
	"github.com/speclaunch/speclaunch/internal/tomlguard"
)

// scheduleRow is the operator's width schedule: concurrency buckets, each
// with a width (1 = speculation off at that load). A width given as
// draft-block-size is the one-bucket schedule; both at one layer is an
// error, at two layers the higher wins.
var scheduleRow = Row{Name: "draft-schedule", Flag: "draft-schedule", Envs: []string{"MLXCEL_DRAFT_SCHEDULE"}, Key: "draft.schedule", Default: "resolved",
	Doc: "the width by load: `1:6,2-3:4,4+:1` is width 6 at one request in flight, 4 at two or three, speculation off (width 1) at four or more; in a profile also `[[1, 1, 6], [2, 3, 4], [4, 0, 1]]` (hi 0 = no upper bound). Buckets start at 1, leave no gaps, end open; at most 64. A width (`draft-block-size`) is the one-bucket schedule: given at the same layer as a schedule it is an error, at another layer the higher layer wins. vLLM takes the schedule itself; for the other engines serve follows it (docs/engines.md, \"Width schedules\")",
	apply: func(r Row, l *layer, s *Settings) error {
		f, err := l.schedule(r)
		if err != nil || f.Value == nil {
			return err
		}
		if !s.Width.Set() {
			s.Schedule = f
			return nil
		}
		switch {
		case s.Width.Src.Origin == f.Src.Origin:
			return &Error{Src: f.Src, Msg: fmt.Sprintf("a width (%s) and a schedule were both given: keep one (a width is the schedule %q)", s.Width.Src, fmt.Sprintf("1+:%d", s.Width.Value))}
		case s.Width.Src.Origin > f.Src.Origin:
			l.notices = append(l.notices, Notice{"info", fmt.Sprintf("%s (width %d) is above %s in precedence; keeping the width, the schedule is not used", s.Width.Src, s.Width.Value, f.Src)})
		default:
			l.notices = append(l.notices, Notice{"info", fmt.Sprintf("%s is above %s (width %d) in precedence; keeping the schedule, the width is not used", f.Src, s.Width.Src, s.Width.Value)})
			s.Width, s.WidthNote, s.Schedule = Field[int]{}, "", f
		}
		return nil
	},
	show: func(s *Settings) (any, string) {
		if s.Schedule.Value == nil {
			return "(resolved)", s.Schedule.Src.String()
		}
		return s.Schedule.Value.String(), s.Schedule.Src.String()
	}}

// schedule layers the row: flag, then variable (the text form), then the
// profile's draft.schedule (triples or the text form).
func (l *layer) schedule(r Row) (Field[schedule.Schedule], error) {
	textRow := r
	textRow.Key = "" // the profile's value may be triples: read below
	if v, src, ok := l.raw(textRow); ok {
		if strings.TrimSpace(v) == "" { // set, to spaces: docs/schedule.md
			return Field[schedule.Schedule]{}, &Error{Src: src, Msg: "bad draft schedule", Err: fmt.Errorf("the schedule is empty: write it as load:width pairs, e.g. \"1:6,2-3:4,4+:1\", or %s", unsetFix(src.Origin))}
		}
		return checkedSchedule(schedule.Parse(v, ""))(src)
	}
	p := l.prof
	if p == nil || p.Draft.Schedule == nil {
		return Field[schedule.Schedule]{}, nil
	}
	src := Source{Profile, p.Where("draft.schedule")}
	switch x := p.Draft.Schedule.(type) {
	case string:
		return checkedSchedule(schedule.Parse(x, ""))(src)
	case []any:
		var s schedule.Schedule
		ts, err := schedule.TriplesOf(x)
		if err == nil {
			s, err = schedule.FromTriples(ts, "")
		}
		if b := schedule.BucketOf(err); b > 0 {
			// The bucket's own line, where it is written on one of
			// its own: "schedule = [" may be lines above it.
			src.Name = p.WhereElement("draft.schedule", b)
		}
		if err != nil {
			return Field[schedule.Schedule]{}, badProfileSchedule(src, err)
		}
		return checkedSchedule(s, nil)(src)
	}
	// A table too: the profile's decoder leaves draft.schedule's type to
	// this switch (profiles/profile.go, Parse).
	return Field[schedule.Schedule]{}, badProfileSchedule(src, fmt.Errorf("it is %s, not an array of [lo, hi, width] or a string", tomlguard.Kind(p.Draft.Schedule)))
}

// badProfileSchedule is the error for every fault of a profile's
// draft.schedule, that the key's reader finds here or the profile's
// decoder before it (a number past int64: findProfile): the key, why,
// and an example in each form the key takes, as written in a profile.
func badProfileSchedule(src Source, err error) *Error {
	return &Error{Src: src, Msg: "bad draft.schedule: " + err.Error() + `; write it e.g. as draft.schedule = [[1, 1, 6], [2, 3, 4], [4, 0, 1]] (hi 0 = no upper bound, width 1 = speculation off at that load) or draft.schedule = "1:6,2-3:4,4+:1"`}
}

// checkedSchedule adds the source to a parsed schedule and refuses one
// that is off at every load: that is no speculation, which a schedule is
// not the way to ask for.
func checkedSchedule(s schedule.Schedule, err error) func(Source) (Field[schedule.Schedule], error) {
	return func(src Source) (Field[schedule.Schedule], error) {
		switch {
		case err != nil && src.Origin == Profile:
			return Field[schedule.Schedule]{}, badProfileSchedule(src, err)
		case err != nil:
			return Field[schedule.Schedule]{}, &Error{Src: src, Msg: "bad draft schedule", Err: err}
		case s.Max() < key.MinWidth:
			return Field[schedule.Schedule]{}, &Error{Src: src, Msg: "the schedule is off (width 1) at every load: to run without speculation, remove the draft model (draft.model = \"\"); otherwise give a bucket a width of 2 or more"}
		}
		return Field[schedule.Schedule]{Value: s.WithSource("override"), Src: src}, nil
	}
}
