package evidence

import (
	"github.com/speclaunch/speclaunch/internal/quote"
	"github.com/speclaunch/speclaunch/internal/record"
)

// Arm is one arm's evidence: its figures recomputed from its raw runs, or
// the record's stored figures when it kept no runs (a transcribed record).
type Arm struct {
	*record.Arm
	// Stats and Cost are recomputed from the runs when FromRuns, else the
	// record's stored ones.
	Stats    record.Stats
	Cost     record.Cost
	FromRuns bool
}

// Evidence is a record with every figure the rule judges recomputed from
// its raw runs. Build it with Of; it does not change the record.
type Evidence struct {
	Rec  *record.Record
	Arms []Arm
	// Classic and Default are the classic and default arms, nil when the
	// record has none.
	Classic, Default *Arm
	rep              map[int]*Arm
	// writtenBy is the command a finding's fix names (WrittenBy); a level
	// of a load sweep gets the sweep's from LevelDisagreements, since the
	// level's view (record.AtLevel) has no levels of its own.
	writtenBy string
}

// Of gathers a record's evidence: per arm, its statistics and cost from
// its measured runs (when it has any runs), and which arm stands for each
// width (record.Representative), in one pass over the arms.
func Of(rec *record.Record) *Evidence {
	e := &Evidence{Rec: rec, Arms: make([]Arm, len(rec.Arms)), writtenBy: WrittenBy(rec)}
	at := make(map[*record.Arm]*Arm, len(rec.Arms))
	for i := range rec.Arms {
		a := &rec.Arms[i]
		at[a] = &e.Arms[i]
		x := Arm{Arm: a, Stats: a.Stats, Cost: a.Cost, FromRuns: len(a.Runs) > 0}
		if x.FromRuns {
			x.Stats = Describe(Rates(a))
			x.Cost = ArmCost(a)
		}
		e.Arms[i] = x
	}
	e.Classic, e.Default = at[rec.ClassicArm()], at[rec.DefaultArm()]
	e.rep = map[int]*Arm{}
	for w, a := range rec.Representatives() {
		e.rep[w] = at[a]
	}
	return e
}

// Width is the arm that stands for width w (record.Representative), nil
// when no arm at w measured.
func (e *Evidence) Width(w int) *Arm { return e.rep[w] }

// Name names the record in findings: its name (or title) is the record's
// own text, quoted when it holds a control character and cut past
// quote.Max bytes, so that findings can be printed whole.
func (e *Evidence) Name() string {
	switch {
	case e.Rec.Name != "":
		return quote.Text(e.Rec.Name, 0)
	case e.Rec.Title != "":
		return quote.Text(e.Rec.Title, 0)
	}
	return "an unnamed record"
}

// WrittenBy names the command that writes a record of rec's kind, for the
// fix a finding suggests: a load sweep (its levels, or one level of it,
// since record.AtLevel keeps Method.Load) is written by tune or bench
// --concurrency, any other record by bench.
func WrittenBy(rec *record.Record) string {
	if len(rec.Levels) > 0 || rec.Method.Load != nil {
		return "speclaunch tune (or speclaunch bench --concurrency)"
	}
	return "speclaunch bench"
}

// HasRuns reports whether any arm kept raw runs; a transcribed record may
// keep only its figures, and is then judged on those.
func (e *Evidence) HasRuns() bool {
	for i := range e.Arms {
		if e.Arms[i].FromRuns {
			return true
		}
	}
	return false
}

// classicOK is the classic arm when it measured.
func (e *Evidence) classicOK() *Arm {
	if e.Classic == nil || e.Classic.Status != record.StatusOK {
		return nil
	}
	return e.Classic
}
