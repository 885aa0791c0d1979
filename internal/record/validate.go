package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"unicode"

	"github.com/speclaunch/speclaunch/internal/key"
	"github.com/speclaunch/speclaunch/internal/quote"
)

// Bounds on what one record may hold. A real record has a dozen arms of a
// few dozen runs (the largest committed one: 16 arms, 120 runs in an arm);
// a record far above these is not one `speclaunch bench` wrote, and every
// figure derived from it (the bootstrap above all) grows with its runs.
const (
	// MaxArms is above one arm per width of the whole range (2 to 256)
	// plus classic, default and policy.
	MaxArms = 300
	// MaxRunsPerArm allows 50 rounds of 10 prompts, classic's two
	// brackets per round included; the bootstrap of two such arms takes
	// about a quarter of a second (go test ./internal/evidence -bench Large).
	MaxRunsPerArm = 1000
	// MaxRuns bounds the record as a whole.
	MaxRuns = 10000
	// MaxLevels is the most load levels of one sweep: one per bucket of
	// the largest schedule (schedule.MaxBuckets).
	MaxLevels = 64
	// MaxText bounds each line of prose a record carries (its title, each
	// note); the longest committed note is about 800 bytes.
	MaxText = 4096
	// MaxNotes is the most notes of one record.
	MaxNotes = 64
	// MaxWallS bounds one run's wall time, in seconds: a day, far above
	// any request (bench's request timeout is 120 s unless raised) or
	// load window (at most 10 minutes) a bench run times.
	MaxWallS = 86400
	// MaxTokPerS bounds a rate, a run's and an arm's statistics: a
	// million tokens a second, far above any engine (the fastest
	// committed run, four requests at once, streamed 3,412:
	// docs/benchmark_results/h200-llamacpp-d32676d-q4_0-pair3141L24-code-c4.json).
	MaxTokPerS = 1e6
)

// ErrInvalid is wrapped by every error Validate returns.
var ErrInvalid = errors.New("invalid record")

// FieldError names the field of a record that is wrong and the fix.
type FieldError struct {
	Field string // JSON path, e.g. "arms[3].width"
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Decode parses a record's .json and validates it (Validate): nothing is
// derived from a record that fails. Unknown fields are kept out of the
// check (a newer speclaunch may add some: the schema only grows).
func Decode(data []byte) (*Record, error) {
	if t := bytes.TrimSpace(data); len(t) == 0 || t[0] != '{' {
		return nil, &FieldError{Field: "(top level)", Msg: "a record is a JSON object; regenerate the .json with speclaunch bench"}
	}
	if err := checkSize(data); err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, jsonError(data, err)
	}
	if err := Validate(&r); err != nil {
		return nil, err
	}
	return &r, nil
}

// sweepFix is the fix for a load sweep's record that no sweep writes:
// the file was edited.
const sweepFix = "; restore the record, or measure again with speclaunch tune (or speclaunch bench --concurrency)"

// Validate checks what every derivation relies on: the schema, a complete
// key, the counts of arms and runs (MaxArms, MaxRunsPerArm, MaxRuns), each
// arm's kind, status and width (0 for classic, 2 to 256 otherwise: widths 0
// and 1 disable speculation), and finite, non-negative rates. The first
// problem is returned as a *FieldError.
func Validate(r *Record) error {
	bad := func(field, format string, args ...any) error {
		return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if r.Schema != Schema {
		return bad("schema", "is %d; this speclaunch reads record schema %d (a record's .json starts with \"schema\": %d)", r.Schema, Schema, Schema)
	}
	if strings.ContainsAny(r.Name, `/\`) || strings.Contains(r.Name, "..") {
		return bad("name", "%q is not a file name: a record's name is its .md's base name, without directories", r.Name)
	}
	if err := validateText(r); err != nil {
		return err
	}
	if err := validateKey(r.Key); err != nil {
		return err
	}
	switch {
	case len(r.Arms) == 0 && len(r.Levels) == 0 && (r.Method.Load != nil || r.Earned != nil):
		// A load sweep keeps its arms per level: "arms: is empty" named a
		// field that is empty in every sweep.
		return bad("levels", "is missing or empty, but the record is a load sweep (it has method.load or earned_schedule), whose arms are kept level by level"+sweepFix)
	case len(r.Arms) == 0 && len(r.Levels) == 0:
		return bad("arms", "is empty: a record measures at least a classic arm and one width")
	}
	if len(r.Levels) > MaxLevels {
		return bad("levels", "holds %d levels, above the %d a record may hold; split the sweep into several records", len(r.Levels), MaxLevels)
	}
	arms, total := len(r.Arms), 0
	if err := validateArms(r.Arms, "arms", &total); err != nil {
		return err
	}
	prev := 0
	for i := range r.Levels {
		l := &r.Levels[i]
		at := fmt.Sprintf("levels[%d]", i)
		switch {
		case l.Concurrency < 1:
			return bad(at+".concurrency", "is %d: a level is a whole number of clients, from 1"+sweepFix, l.Concurrency)
		case l.Concurrency == prev:
			return bad(at+".concurrency", "is %d, as levels[%d].concurrency is: each level is measured once, the levels ascending"+sweepFix, l.Concurrency, i-1)
		case l.Concurrency < prev:
			return bad(at+".concurrency", "is %d, below levels[%d].concurrency (%d): the levels ascend"+sweepFix, l.Concurrency, i-1, prev)
		}
		prev = l.Concurrency
		if len(l.Arms) == 0 {
			return bad(at+".arms", "is empty: a level measures at least a classic arm and one width")
		}
		if err := validateArms(l.Arms, at+".arms", &total); err != nil {
			return err
		}
		arms += len(l.Arms)
	}
	if arms > MaxArms {
		return bad("arms", "holds %d arms, above the %d a record may hold; split the sweep into several records", arms, MaxArms)
	}
	if total > MaxRuns {
		return bad("arms", "hold %d runs in all, above the %d a record may hold; use fewer rounds or prompts per record", total, MaxRuns)
	}
	return nil
}

// validateArms checks each arm of one list and adds their runs to total.
func validateArms(as []Arm, at string, total *int) error {
	if len(as) > MaxArms {
		return &FieldError{Field: at, Msg: fmt.Sprintf("holds %d arms, above the %d a record may hold; split the sweep into several records", len(as), MaxArms)}
	}
	for i := range as {
		if err := validateArm(&as[i], fmt.Sprintf("%s[%d]", at, i)); err != nil {
			return err
		}
		*total += len(as[i].Runs)
	}
	return nil
}

// OneLine is s as a record holds prose: every run of white space and
// unprintable characters (a wrapped paragraph's line ends, a tab) one
// space, the ends trimmed. Write applies it (bench.Write); validateText
// refuses a record whose text is not so.
func OneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unprintable(r) }), " ")
}

// unprintable is what a record's one line of text may not hold
// (quote.Printable): a control character (a newline splits the line, an
// escape drives the terminal), a bidirectional control, which reorders
// what a terminal shows after it, or any other character that does not
// print.
func unprintable(r rune) bool { return !quote.Printable(r) }

// bidiControl names a bidirectional control in the refusal (U+202A to
// U+202E, U+2066 to U+2069).
func bidiControl(r rune) bool {
	return r >= '\u202A' && r <= '\u202E' || r >= '\u2066' && r <= '\u2069'
}

// TextFits says why prose of a record's title or a note does not fit
// (MaxText), "" when it does: for a flag's check before a run.
func TextFits(s string) string {
	if n := len(OneLine(s)); n > MaxText {
		return fmt.Sprintf("is %d bytes long, above the %d a record's title or note may hold", n, MaxText)
	}
	return ""
}

// validateText bounds the prose a record carries and keeps unprintable
// characters out of it: policy list and explain print it to terminals.
func validateText(r *Record) error {
	if len(r.Notes) > MaxNotes {
		return &FieldError{Field: "notes", Msg: fmt.Sprintf("holds %d notes, above the %d a record may hold", len(r.Notes), MaxNotes)}
	}
	type text struct {
		field, value string
		max          int
	}
	fields := []text{{"name", r.Name, 255}, {"title", r.Title, MaxText}, {"date", r.Date, 64}, {"launcher", r.Launcher, 256}}
	for i, n := range r.Notes {
		fields = append(fields, text{fmt.Sprintf("notes[%d]", i), n, MaxText})
	}
	for _, f := range fields {
		if len(f.value) > f.max {
			return &FieldError{Field: f.field, Msg: fmt.Sprintf("is %d bytes long, above the %d it may hold", len(f.value), f.max)}
		}
		if i := strings.IndexFunc(f.value, unprintable); i >= 0 {
			r, what := []rune(f.value[i:])[0], "a control character"
			switch {
			case bidiControl(r):
				what = "a bidirectional control character"
			case !unicode.IsControl(r):
				what = "a character that does not print"
			}
			return &FieldError{Field: f.field, Msg: fmt.Sprintf("holds %s (%U at byte %d); a record's text is one printable line", what, r, i)}
		}
	}
	return nil
}

func validateKey(k Key) error {
	parse := []struct {
		field, value string
		parse        func(string) error
	}{
		{"key.engine", k.Engine, func(s string) error { _, err := key.ParseEngine(s); return err }},
		{"key.drafter", k.Drafter, func(s string) error { _, err := key.ParseDrafter(s); return err }},
		{"key.capability", k.Capability, func(s string) error { _, err := key.ParseCapability(s); return err }},
		{"key.quant", k.Quant, func(s string) error { _, err := key.ParseQuant(s); return err }},
	}
	for _, p := range parse {
		if strings.TrimSpace(p.value) == "" {
			return &FieldError{Field: p.field, Msg: "is empty: a record names the policy key it measured; regenerate it with speclaunch bench"}
		}
		if err := p.parse(p.value); err != nil {
			return &FieldError{Field: p.field, Msg: err.Error()}
		}
	}
	return nil
}

func validateArm(a *Arm, at string) error {
	bad := func(field, format string, args ...any) error {
		return &FieldError{Field: at + "." + field, Msg: fmt.Sprintf(format, args...)}
	}
	switch a.Kind {
	case KindClassic:
		if a.Width != 0 || a.EngineWidth != 0 {
			return bad("width", "is %d for the classic arm, which drafts nothing; classic's width is 0", max(a.Width, a.EngineWidth))
		}
	case KindDefault, KindPolicy, KindWidth:
		if err := checkWidth(a.Width); err != nil {
			return bad("width", "%v", err)
		}
		if a.EngineWidth != 0 {
			if err := checkWidth(a.EngineWidth); err != nil {
				return bad("engine_width", "%v", err)
			}
		}
	default:
		return bad("kind", "%q is not an arm kind (classic, default, policy, width)", a.Kind)
	}
	switch a.Status {
	case StatusOK, StatusNotMeasurement, StatusFailed:
	default:
		return bad("status", "%q is not an arm status (%s, %s, %s)", a.Status, StatusOK, StatusNotMeasurement, StatusFailed)
	}
	if len(a.Runs) > MaxRunsPerArm {
		return bad("runs", "holds %d runs, above the %d an arm may hold; use fewer rounds or prompts per record", len(a.Runs), MaxRunsPerArm)
	}
	for j := range a.Runs {
		if f, msg := badRun(&a.Runs[j]); f != "" {
			return bad(fmt.Sprintf("runs[%d].%s", j, f), "%s", msg)
		}
	}
	return badFigures(a, bad)
}

// badRun is a run's first figure no measurement gives, as field and
// message ("" if none): a negative time or count, a rate that is not a
// number (badRaw); a time or rate past what any run takes or reaches
// (MaxWallS, MaxTokPerS); tokens in no time; a rate that is not the run's
// tokens over its wall time, as bench writes it (a run whose rate
// disagrees with its own figures was edited).
func badRun(r *Run) (string, string) {
	if f, msg := badRaw(r); f != "" {
		return f, msg
	}
	switch {
	case r.TokPerS > 0 && (r.WallS <= 0 || r.CompletionTokens <= 0):
		return "tok_per_s", fmt.Sprintf("is %v with wall_s %v and completion_tokens %d: a rate is tokens over wall time, and this run has no such figures; the record was edited, re-run the bench", r.TokPerS, r.WallS, r.CompletionTokens)
	case r.CompletionTokens > 0 && r.WallS == 0:
		return "wall_s", fmt.Sprintf("is 0 with completion_tokens %d: tokens take time to stream, and a run's rate is its tokens over its wall time; the record was edited, re-run the bench", r.CompletionTokens)
	case r.WallS > MaxWallS:
		return "wall_s", fmt.Sprintf("is %v: above %d s (a day), longer than any run bench times; the record was edited, re-run the bench", r.WallS, MaxWallS)
	case r.TokPerS > MaxTokPerS:
		return "tok_per_s", fmt.Sprintf("is %v: above %g tokens/s, faster than any engine streams; the record was edited, re-run the bench", r.TokPerS, MaxTokPerS)
	}
	if r.TokPerS > 0 || r.CompletionTokens > 0 {
		if want := float64(r.CompletionTokens) / r.WallS; math.IsInf(want, 0) || math.Abs(r.TokPerS-want) > 1e-3*want {
			return "tok_per_s", fmt.Sprintf("is %v, but the run's completion_tokens over its wall_s is %.6g: the record was edited; re-run the bench", r.TokPerS, want)
		}
	}
	return "", ""
}

// badRaw is a run's first figure no measurement gives (a negative time or
// count, a rate that is not a number), as field and message; "" if none.
func badRaw(r *Run) (string, string) {
	if x := r.TokPerS; math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
		return "tok_per_s", fmt.Sprintf("is %v: a rate is a finite number, 0 or more", x)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"wall_s", r.WallS}, {"ttft_s", r.TTFTS}, {"predicted_ms", r.PredictedMS}, {"predicted_per_second", r.PredictedPerS}, {"prompt_ms", r.PromptMS}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return f.name, fmt.Sprintf("is %v: a time or rate is a finite number, 0 or more", f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"completion_tokens", r.CompletionTokens}, {"draft_n", r.DraftN}, {"draft_n_accepted", r.DraftAccepted}, {"draft_rounds", r.DraftRounds}, {"requests", r.Requests}, {"prompt_n", r.PromptN}, {"cache_n", r.CacheN}} {
		if f.v < 0 {
			return f.name, fmt.Sprintf("is %d: a count is 0 or more", f.v)
		}
	}
	if r.DraftAccepted > r.DraftN {
		return "draft_n_accepted", fmt.Sprintf("is %d, above draft_n %d: no more tokens are accepted than drafted", r.DraftAccepted, r.DraftN)
	}
	return "", ""
}

// badFigures checks an arm's derived figures the same way: the cost of a
// cycle and the acceptance counts (a cost of -5 ms proposed an entry that
// policy check then refused).
func badFigures(a *Arm, bad func(field, format string, args ...any) error) error {
	finite := func(field string, v, hi float64) error {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || (hi > 0 && v > hi) {
			if hi > 0 {
				return bad(field, "is %v: a fraction from 0 to %v", v, hi)
			}
			return bad(field, "is %v: a finite number, 0 or more", v)
		}
		return nil
	}
	st := a.Stats
	for _, f := range []struct {
		name string
		v    float64
	}{{"min", st.Min}, {"median", st.Median}, {"max", st.Max}, {"mean", st.Mean}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 || f.v > MaxTokPerS {
			return bad("stats."+f.name, "is %v: a rate from 0 to %g tokens/s", f.v, MaxTokPerS)
		}
	}
	if st.N < 0 {
		return bad("stats.n", "is %d: a count is 0 or more", st.N)
	}
	if err := finite("cost.ms_per_cycle", a.Cost.MSPerCycle, 0); err != nil {
		return err
	}
	if a.Cost.VerifyRows < 0 {
		return bad("cost.verify_rows", "is %d: a count of rows is 0 or more", a.Cost.VerifyRows)
	}
	ac := a.Acceptance
	if err := finite("acceptance.rate", ac.Rate, 1); err != nil {
		return err
	}
	if err := finite("acceptance.mean_accepted_len", ac.MeanAccepted, 0); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"drafted", ac.Drafted}, {"accepted", ac.Accepted}, {"cycles", ac.Cycles}} {
		if c.v < 0 {
			return bad("acceptance."+c.name, "is %d: a count is 0 or more", c.v)
		}
	}
	if ac.Accepted > ac.Drafted {
		return bad("acceptance.accepted", "is %d, above drafted %d: no more tokens are accepted than drafted", ac.Accepted, ac.Drafted)
	}
	for i, x := range ac.ByPosition {
		if err := finite(fmt.Sprintf("acceptance.by_position[%d]", i), x, 1); err != nil {
			return err
		}
	}
	return nil
}

// checkWidth is key.CheckWidth for a width a record states: the same range,
// worded for a record rather than an operator.
func checkWidth(w int) error {
	if w < key.MinWidth || w > key.MaxWidth {
		return fmt.Errorf("%d is outside %d to %d, the widths speculation runs at (0 and 1 disable it); a record's speculative arm states the width it ran", w, key.MinWidth, key.MaxWidth)
	}
	return nil
}

// The most JSON values (object keys count), and objects and arrays among
// them, that Decode builds a record from. A record at the limits (MaxRuns
// runs, every field given, each at the widest width with its 255
// accepted-by-position counts) holds about 3.3 million values and 20,000
// objects and arrays; a committed one of 12 arms and 204 runs about 400
// objects. Without the bound a 6 MB file of two million empty arms took
// gigabytes to decode before Validate could count them.
const (
	maxValues     = 8_000_000
	maxContainers = 100_000
)

// checkSize counts data's JSON values in one pass over its bytes,
// building nothing, and refuses a record with more values than maxValues
// or more objects and arrays than maxContainers. It counts as
// json.Decoder.Token would (a key, a scalar and an opening bracket are
// values; closing brackets are not) at about a hundredth of Token's cost:
// Token took 3.5 s over a record at the limits. A syntax error is left to
// json.Unmarshal, which says where it is.
func checkSize(data []byte) error {
	if v, c := jsonSize(data, maxValues, maxContainers); v > maxValues || c > maxContainers {
		return &FieldError{Field: "(top level)", Msg: fmt.Sprintf("holds more than %d JSON values or %d objects and arrays, far more than a record of %d arms and %d runs; regenerate it with speclaunch bench", maxValues, maxContainers, MaxArms, MaxRuns)}
	}
	return nil
}

// jsonSize counts the values and the objects and arrays in data, stopping
// once either count is over its bound.
func jsonSize(data []byte, maxV, maxC int) (values, containers int) {
	for i := 0; i < len(data) && values <= maxV && containers <= maxC; i++ {
		switch data[i] {
		case '}', ']', ',', ':', ' ', '\t', '\n', '\r':
			continue
		case '{', '[':
			containers++
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		default: // a number, true, false or null: up to the next delimiter
			for i+1 < len(data) && !jsonDelim(data[i+1]) {
				i++
			}
		}
		values++
	}
	return values, containers
}

// jsonSpace is the white space JSON allows between values.
const jsonSpace = " \t\r\n"

// endsEarly says whether data's JSON value is cut short: it ends, white
// space aside, before the value does. The decoder says so with
// io.ErrUnexpectedEOF where Unmarshal says "unexpected end of JSON input"
// or, for a number cut after its point, that the character after it (one
// it makes up past the end, or a trailing newline) is invalid.
func endsEarly(data []byte) bool {
	var v json.RawMessage
	err := json.NewDecoder(bytes.NewReader(bytes.TrimRight(data, jsonSpace))).Decode(&v)
	return errors.Is(err, io.ErrUnexpectedEOF)
}

// jsonDelim: c ends a JSON number or literal.
func jsonDelim(c byte) bool {
	switch c {
	case '{', '}', '[', ']', ',', ':', '"', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// jsonError words a decoding error for an operator: the record's field
// and what it should hold, not Go's types ("Go struct field
// Run.arms.runs.tok_per_s of type float64"), and the value cut (a
// 10^6-digit number made a 1,000,217-character line), and a file cut
// short said as one: it was "invalid character ' ' after decimal point"
// at a byte past the file's end, for one ending in `"ratio": 1.`.
func jsonError(data []byte, err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		want := "another type"
		if te.Type != nil {
			switch te.Type.Kind() {
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				want = "a whole number in range"
			case reflect.Float32, reflect.Float64:
				want = "a number in range"
			case reflect.String:
				want = "a string"
			case reflect.Bool:
				want = "true or false"
			case reflect.Slice, reflect.Array:
				want = "a list"
			case reflect.Struct, reflect.Map, reflect.Pointer:
				want = "an object"
			}
		}
		field := te.Field
		if field == "" {
			field = "(top level)"
		}
		return &FieldError{Field: field, Msg: fmt.Sprintf("is %s, want %s; regenerate the record with speclaunch bench", quote.Text(te.Value, 40), want)}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) && endsEarly(data) {
		return &FieldError{Field: "(top level)", Msg: fmt.Sprintf("ends early, inside a value, at byte %d (truncated?): restore the file from where it was copied (git, a backup), or re-run the bench or tune that wrote it", len(bytes.TrimRight(data, jsonSpace)))}
	}
	if errors.As(err, &se) {
		return &FieldError{Field: "(top level)", Msg: fmt.Sprintf("is not valid JSON at byte %d (%s); regenerate the record with speclaunch bench", se.Offset, quote.Text(se.Error(), 80))}
	}
	return fmt.Errorf("does not parse as a record: %s; regenerate it with speclaunch bench", quote.Text(err.Error(), 160))
}
