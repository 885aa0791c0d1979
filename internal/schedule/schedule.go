// Package schedule holds speclaunch's unit of answer: a width schedule,
// concurrency buckets each with a draft width (1 = speculation off) and
// where that width came from. A single width is a one-bucket schedule, so
// every flag, variable, profile key and policy entry that names one width
// keeps its meaning. The package is a leaf: parsing, validation, lookup
// and rendering, no I/O.
package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Limits shared by every surface that reads a schedule.
const (
	// MaxBuckets bounds a schedule; more buckets than this is a typo or a
	// hostile file, never a measurement (bench measures a handful of levels).
	MaxBuckets = 64
	// Off is the width that means no speculation at that load.
	Off = 1
	// MaxWidth mirrors key.MaxWidth: no drafter runs a wider verify block.
	MaxWidth = 256
	// maxLevel bounds a bucket edge; no server runs more concurrent requests.
	maxLevel = 1 << 20
)

// Bucket is one load range: from Lo to Hi concurrent requests inclusive
// (Hi 0 = no upper bound), run at Width.
type Bucket struct {
	Lo     int    `json:"lo"`
	Hi     int    `json:"hi"` // 0 = no upper bound
	Width  int    `json:"width"`
	Source string `json:"source,omitempty"` // e.g. "override", "measured", "tuned", "adaptive", "kind-default"
}

// Schedule is a list of buckets that covers every load from 1 up, in
// order, without gaps or overlaps. The zero value is "no schedule".
type Schedule []Bucket

// Flat is the one-bucket schedule of a single width.
func Flat(width int, source string) Schedule {
	return Schedule{{Lo: 1, Hi: 0, Width: width, Source: source}}
}

// Contains reports whether the bucket covers n concurrent requests.
func (b Bucket) Contains(n int) bool {
	return n >= b.Lo && (b.Hi == 0 || n <= b.Hi)
}

// Range renders the bucket's load range: "1", "2-3", "4+".
func (b Bucket) Range() string {
	switch {
	case b.Hi == 0:
		return strconv.Itoa(b.Lo) + "+"
	case b.Hi == b.Lo:
		return strconv.Itoa(b.Lo)
	default:
		return strconv.Itoa(b.Lo) + "-" + strconv.Itoa(b.Hi)
	}
}

// InFlight says a load range (as Range renders it) in words with the
// count's own number: "1 request in flight", "2-3 requests in flight".
func InFlight(rng string) string {
	if rng == "1" {
		return "1 request in flight"
	}
	return rng + " requests in flight"
}

// InFlightAt is InFlight for a load read at mean: "or none" is added
// where the mean is below one, as an idle server's load falls in the first
// bucket (a log read "sat at 1 request in flight for 10s (mean 0.0)").
func InFlightAt(rng string, mean float64) string {
	if mean < 1 {
		return InFlight(rng) + " or none"
	}
	return InFlight(rng)
}

// IsFlat reports whether the schedule is one width at every load.
func (s Schedule) IsFlat() bool {
	if len(s) == 0 {
		return false
	}
	for _, b := range s[1:] {
		if b.Width != s[0].Width {
			return false
		}
	}
	return true
}

// Index returns the index of the bucket that covers n concurrent requests
// (n below 1 counts as 1: an idle server plans for its next request), or
// -1 for an empty schedule.
func (s Schedule) Index(n int) int {
	if n < 1 {
		n = 1
	}
	for i, b := range s {
		if b.Contains(n) {
			return i
		}
	}
	if len(s) > 0 {
		return len(s) - 1
	}
	return -1
}

// At returns the bucket that covers n concurrent requests; the zero Bucket
// for an empty schedule.
func (s Schedule) At(n int) Bucket {
	if i := s.Index(n); i >= 0 {
		return s[i]
	}
	return Bucket{}
}

// Max is the widest width in the schedule (vLLM's num_speculative_tokens
// must cover every bucket); 0 for an empty schedule.
func (s Schedule) Max() int {
	m := 0
	for _, b := range s {
		m = max(m, b.Width)
	}
	return m
}

// Merge joins neighbouring buckets of the same width and source, so a
// schedule earned level by level reads as few ranges as it means.
func (s Schedule) Merge() Schedule {
	var out Schedule
	for _, b := range s {
		if n := len(out); n > 0 && out[n-1].Width == b.Width && out[n-1].Source == b.Source {
			out[n-1].Hi = b.Hi
			continue
		}
		out = append(out, b)
	}
	return out
}

// WithSource returns a copy whose every bucket has the given source.
func (s Schedule) WithSource(src string) Schedule {
	out := append(Schedule(nil), s...)
	for i := range out {
		out[i].Source = src
	}
	return out
}

// Validate checks the shape: 1 to MaxBuckets buckets, the first from 1,
// each starting where the one before ended, the last unbounded, widths
// from 1 (off) to MaxWidth. The error says which bucket and the fix.
func (s Schedule) Validate() error {
	return s.validate(false, func(i int) string { return fmt.Sprintf("bucket %d (%s)", i+1, s[i].Range()) })
}

// validate is Validate with each bucket named by bucket(i): as the
// operator wrote it where there is a text ("0:4" is not the "0+" its
// numbers render as), by its range where there is none. triple says the
// schedule was written as [lo, hi, width] triples, so that a fix is said
// in the form the operator can follow ("2-4" is no triple).
func (s Schedule) validate(triple bool, bucket func(i int) string) error {
	i, err := s.check(triple, bucket)
	if err != nil && i >= 0 {
		return inBucket(i+1, err)
	}
	return err
}

// check is validate: the fault, and the bucket (from 0) it is about, -1
// where it is about the whole schedule.
func (s Schedule) check(triple bool, bucket func(i int) string) (int, error) {
	switch {
	case len(s) == 0 && triple:
		return -1, errors.New("the schedule is empty: give at least one bucket, e.g. [[1, 0, 4]] (width 4 at every load)")
	case len(s) == 0:
		return -1, errors.New("the schedule is empty: give at least one bucket, e.g. \"1+:4\" (width 4 at every load)")
	case len(s) > MaxBuckets:
		return -1, fmt.Errorf("the schedule has %d buckets, above the limit of %d: merge neighbouring loads that share a width", len(s), MaxBuckets)
	}
	next := 1
	for i, b := range s {
		where := bucket(i)
		loWhy, hiWhy, widthWhy := outside(lo, b.Lo, strconv.Itoa(b.Lo)), outside(hi, b.Hi, strconv.Itoa(b.Hi)), outside(wide, b.Width, strconv.Itoa(b.Width))
		switch {
		case loWhy != "":
			return i, fmt.Errorf("%s %s", where, loWhy)
		case hiWhy != "":
			return i, fmt.Errorf("%s %s", where, hiWhy)
		case b.Hi != 0 && b.Hi < b.Lo:
			return i, fmt.Errorf("%s ends below where it starts: %s", where, s.hiFix(i, triple))
		case s.lower(i) >= 0:
			// Any other advice would be about a neighbour the operator
			// did not mean: [[4, 0, 1], [1, 3, 6]] was told to start
			// [4, 0, 1] at 1.
			return i, fmt.Errorf("%s comes before %s, which starts at a lower load: list the buckets in ascending order of load", where, bucket(s.lower(i)))
		case b.Lo < next:
			return i, fmt.Errorf("%s overlaps the bucket before it, which covers up to %d: start this one at %d", where, next-1, next)
		case b.Lo > next:
			gap := fmt.Sprintf("loads %d-%d", next, b.Lo-1)
			if next == b.Lo-1 {
				gap = fmt.Sprintf("load %d", next)
			}
			return i, fmt.Errorf("%s leaves %s without a width: start this one at %d, or add a bucket for it", where, gap, next)
		case widthWhy != "":
			return i, fmt.Errorf("%s %s", where, widthWhy)
		}
		if b.Hi == 0 {
			if i != len(s)-1 {
				return i, fmt.Errorf("%s has no upper bound but buckets follow it: give it an upper bound, or drop the ones after it", where)
			}
			return -1, nil
		}
		next = b.Hi + 1
	}
	return len(s) - 1, fmt.Errorf("the last bucket ends at %s: end the schedule with an open bucket (%d+ or hi = 0) so every load has a width", InFlight(strconv.Itoa(next-1)), next)
}

// The numbers of a [lo, hi, width] triple, in its order.
const (
	lo = iota
	hi
	wide
)

// outside says why number field of a bucket (lo, hi or wide), n, lies
// outside what a schedule takes, with the number as the operator wrote
// it (text), or "" where it lies inside. It is the one wording of a
// number out of range, however far: validate's, and OutOfRange's for
// one an int or TOML cannot hold, which passes n as ±maxNumber.
func outside(field, n int, text string) string {
	text = clip(text)
	switch {
	case field == lo && n < 1:
		return fmt.Sprintf("starts at %s requests in flight: loads start at 1", text)
	case field == lo && n > maxLevel:
		return fmt.Sprintf("starts at %s requests in flight, above %d, more than any server runs: start the bucket at a load a server sees (the first bucket at 1)", text, maxLevel)
	case field == hi && n < 0:
		return fmt.Sprintf("ends at %s: a bucket ends at a load of 1 or more, or 0 for no upper bound", text)
	case field == hi && n > maxLevel:
		return fmt.Sprintf("ends at %s requests in flight, above %d, more than any server runs: write N+ for no upper bound (hi = 0 in a [lo, hi, width] triple)", text, maxLevel)
	case field == wide && n < Off:
		return fmt.Sprintf("has width %s: widths start at 1 (speculation off at that load) and 2 (one draft token)", text)
	case field == wide && n > MaxWidth:
		return fmt.Sprintf("has width %s, above %d, which no drafter runs: write a width from 2 to %d, or 1 for speculation off", text, MaxWidth, MaxWidth)
	}
	return ""
}

// lower is the first bucket after bucket i that starts at a lower load
// than it, -1 if none: the buckets are out of order.
func (s Schedule) lower(i int) int {
	for j := i + 1; j < len(s); j++ {
		if s[j].Lo < s[i].Lo {
			return j
		}
	}
	return -1
}

// hiFix is the fix for bucket i, which ends below where it starts, in the
// form it was written in: in the text form the loads swapped ("4-2" for
// 2-4); in a triple, hi is the last load the bucket covers, and swapping
// lo and hi would most often overlap the bucket before ([[1, 3, 4], [4,
// 2, 1]] swapped is [2, 4, 1]).
func (s Schedule) hiFix(i int, triple bool) string {
	b := s[i]
	switch {
	case !triple:
		return fmt.Sprintf("write the lower load first (%d-%d)", b.Hi, b.Lo)
	case i == len(s)-1:
		return fmt.Sprintf("hi %d is below lo %d; hi is the last load the bucket covers, at least its lo, or 0 for no upper bound: e.g. [%d, 0, %d]", b.Hi, b.Lo, b.Lo, b.Width)
	default:
		return fmt.Sprintf("hi %d is below lo %d; hi is the last load the bucket covers: give a hi of %d or more", b.Hi, b.Lo, b.Lo)
	}
}

// FromTriples builds a schedule from [lo, hi, width] triples, the shape of
// TOML's `schedule = [[1, 1, 6], [2, 3, 4], [4, 0, 1]]` and of vLLM's
// num_speculative_tokens_per_batch_size, and validates it.
func FromTriples(t [][]int, source string) (Schedule, error) {
	s := make(Schedule, 0, min(len(t), MaxBuckets+1))
	for i, tr := range t {
		if i > MaxBuckets {
			break // Validate reports the count
		}
		if len(tr) != 3 {
			return nil, notATriple(i+1, strconv.Itoa(len(tr)))
		}
		s = append(s, Bucket{Lo: tr[0], Hi: tr[1], Width: tr[2], Source: source})
	}
	if len(t) > MaxBuckets {
		return nil, fmt.Errorf("the schedule has %d buckets, above the limit of %d: merge neighbouring loads that share a width", len(t), MaxBuckets)
	}
	return s, s.validate(true, func(i int) string { return fmt.Sprintf("bucket %d [%d, %d, %d]", i+1, t[i][0], t[i][1], t[i][2]) })
}

// notATriple is the error for bucket i (from 1) of count numbers.
func notATriple(i int, count string) error {
	return inBucket(i, fmt.Errorf("bucket %d has %s numbers: write each bucket as [lo, hi, width] (hi 0 = no upper bound)", i, count))
}

// BucketError is a fault of one bucket of a schedule: its message names
// the bucket, and Bucket says which (from 1), for a file's reader to name
// the line that bucket is written on (tomlpos.Index.ElementLine).
type BucketError struct {
	Bucket int
	Err    error
}

func (e *BucketError) Error() string { return e.Err.Error() }

func (e *BucketError) Unwrap() error { return e.Err }

// inBucket is err, about bucket i (from 1).
func inBucket(i int, err error) error {
	return &BucketError{Bucket: i, Err: err}
}

// BucketOf is the bucket (from 1) that err is about, 0 where it is about
// none.
func BucketOf(err error) int {
	var be *BucketError
	if errors.As(err, &be) {
		return be.Bucket
	}
	return 0
}

// Triples renders the schedule as [lo, hi, width] triples (TOML, JSON).
func (s Schedule) Triples() [][]int {
	out := make([][]int, len(s))
	for i, b := range s {
		out[i] = []int{b.Lo, b.Hi, b.Width}
	}
	return out
}

// maxText bounds the text form: 64 buckets of "1048576-1048576:256," fit.
const maxText = 2048

// Parse reads the text form typed in a flag or a variable:
// "1:6,2-3:4,4+:1" (a load or a range, a colon, a width; "N+" is open),
// or a bare width "4" (width 4 at every load). Spaces around items are
// ignored. The result is validated.
func Parse(text, source string) (Schedule, error) {
	text = strings.TrimSpace(text)
	if len(text) > maxText {
		return nil, fmt.Errorf("the schedule is %d characters, above the limit of %d: merge neighbouring loads that share a width", len(text), maxText)
	}
	if text == "" {
		return nil, errors.New("the schedule is empty: write it as load:width pairs, e.g. \"1:6,2-3:4,4+:1\"")
	}
	if len(text) >= 2 && strings.ContainsRune(`"'`, rune(text[0])) && text[len(text)-1] == text[0] {
		// docker --env-file and systemd's Environment= pass quotes literally
		return nil, fmt.Errorf("the schedule %s is in quotes: write it without them (an env file passes quotes as part of the value)", clip(text))
	}
	named := func(i int, item string) string {
		return fmt.Sprintf("bucket %d %q", i+1, clip(strings.TrimSpace(item)))
	}
	var far *tooFar
	if bare(text) {
		// a bare width, "4": width 4 at every load
		w, err := parseWidth(text)
		if errors.As(err, &far) {
			return nil, fmt.Errorf("%s %w", named(0, text), err)
		}
		if err != nil {
			return nil, err
		}
		s := Flat(w, source)
		return s, s.Validate()
	}
	items := strings.Split(text, ",")
	if len(items) > MaxBuckets {
		return nil, fmt.Errorf("the schedule has %d buckets, above the limit of %d: merge neighbouring loads that share a width", len(items), MaxBuckets)
	}
	s := make(Schedule, 0, len(items))
	for i, it := range items {
		b, err := parseItem(strings.TrimSpace(it))
		switch {
		case errors.As(err, &far): // said as validate says a number out of range
			return nil, fmt.Errorf("%s %w", named(i, it), err)
		case err != nil:
			return nil, fmt.Errorf("bucket %d %q: %w", i+1, clip(it), err)
		}
		b.Source = source
		s = append(s, b)
	}
	return s, s.validate(false, func(i int) string { return named(i, items[i]) })
}

// bare says whether text is a bare width: digits alone, a sign let in
// for number to refuse by name. It looks at the characters, not at a
// parse: Atoi reports a number too large before a syntax error after it,
// so a parse would take "99999999999999999999+:4", a load too large to
// read, for a width.
func bare(text string) bool {
	if text[0] == '+' || text[0] == '-' {
		text = text[1:]
	}
	return text != "" && strings.Trim(text, "0123456789") == ""
}

// itemForm is how one bucket of the text form is written.
const itemForm = "write load:width, e.g. 1:6, 2-3:4 or 4+:1"

func parseItem(it string) (Bucket, error) {
	load, w, ok := strings.Cut(it, ":")
	switch {
	case strings.TrimSpace(it) == "":
		return Bucket{}, errors.New("is empty (a comma too many?): " + itemForm)
	case !ok:
		return Bucket{}, errors.New("has no colon: " + itemForm)
	}
	width, err := parseWidth(strings.TrimSpace(w))
	if err != nil {
		return Bucket{}, err
	}
	b, err := parseLoad(strings.TrimSpace(load))
	b.Width = width
	return b, err
}

// parseWidth reads a width of the text form.
func parseWidth(w string) (int, error) {
	return readNumber(wide, w, "a whole number")
}

// parseLoad reads a load of the text form: "1", "2-3" or "4+".
func parseLoad(load string) (Bucket, error) {
	var b Bucket
	var err error
	if strings.HasPrefix(load, "-") { // "-1": a sign, not a range missing its start
		return b, fmt.Errorf("load %w", &numberError{load, hasSign})
	}
	switch first, last, isRange := strings.Cut(load, "-"); {
	case strings.HasSuffix(load, "+"):
		b.Lo, err = loadNumber(lo, strings.TrimSuffix(load, "+"))
	case isRange:
		if b.Lo, err = loadNumber(lo, strings.TrimSpace(first)); err == nil {
			b.Hi, err = loadNumber(hi, strings.TrimSpace(last))
		}
		if err == nil && b.Hi == 0 {
			// 0 is no upper bound in a [lo, hi, width] triple only
			// (docs/schedule.md): here an open bucket is N+.
			return Bucket{}, fmt.Errorf("load %s ends at 0: a range ends at a load of 1 or more; write %d+ for no upper bound (0 means none only as hi in a [lo, hi, width] triple)", clip(load), max(b.Lo, 1))
		}
	default:
		b.Lo, err = loadNumber(lo, load)
		b.Hi = b.Lo
	}
	return b, err
}

// loadNumber reads one number of a load, field lo or hi, an error
// naming it.
func loadNumber(field int, n string) (int, error) {
	return readNumber(field, n, "a whole number or range")
}

// tooFar is a number of the text form that an int cannot hold, field lo,
// hi or wide, as written: Parse names its bucket and says it as validate
// says a number out of range (outside), not in a wording of its own.
type tooFar struct {
	field int
	text  string
}

// Error says why, with maxNumber for the number: beyond every bound
// (number refuses a sign, so it is never below one).
func (e *tooFar) Error() string { return outside(e.field, maxNumber, e.text) }

// readNumber reads one number of the text form, field lo, hi or wide
// ("load", "width" in an error), with what it must be (form).
func readNumber(field int, s, form string) (int, error) {
	what := "load"
	if field == wide {
		what = "width"
	}
	n, err := number(s)
	var ne *numberError
	switch {
	case errors.As(err, &ne):
		return 0, fmt.Errorf("%s %w", what, err)
	case errors.Is(err, strconv.ErrRange):
		return 0, &tooFar{field, s}
	case err != nil:
		return 0, fmt.Errorf("%s is not %s: %s", what, form, itemForm)
	}
	return n, nil
}

// numberError is a number that strconv.Atoi reads but the text form
// refuses: one written with a sign or a leading zero ("1:+6", "1:06"),
// never what a schedule is printed as, and most often a typo (1:+6 for
// 1+:6).
type numberError struct{ text, why string }

func (e *numberError) Error() string { return clip(e.text) + " " + e.why }

// number reads one number of the text form, a load or a width: digits
// alone. Atoi's own error is returned for what is no number at all.
func number(s string) (int, error) {
	n, err := strconv.Atoi(s)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, err
	case s[0] == '+' || s[0] == '-':
		return 0, &numberError{s, hasSign}
	case len(s) > 1 && s[0] == '0':
		return 0, &numberError{s, "has a leading zero: write " + strings.TrimLeft(s[:len(s)-1], "0") + s[len(s)-1:]}
	}
	return n, err
}

// hasSign is why a number written with a sign is refused.
const hasSign = "has a sign: write the number alone (a load's + goes after it: 4+:1 is width 1 from 4 requests up)"

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// String renders the text form Parse reads: "1:6,2-3:4,4+:1".
func (s Schedule) String() string {
	parts := make([]string, len(s))
	for i, b := range s {
		parts[i] = b.Range() + ":" + strconv.Itoa(b.Width)
	}
	return strings.Join(parts, ",")
}

// Describe renders the schedule for a person: "width 6 at 1 request, 4 at
// 2-3, off at 4+"; a flat schedule is just "width 4". "width" stands
// before the first width that drafts, so a schedule off at first reads
// "off at 1 request, width 4 at 2+", not "width off at 1 request".
func (s Schedule) Describe() string {
	if len(s) == 0 {
		return "no schedule"
	}
	if s.IsFlat() {
		return "width " + widthWord(s[0].Width)
	}
	var b strings.Builder
	named := false
	for i, k := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		if !named && k.Width > Off {
			b.WriteString("width ")
			named = true
		}
		b.WriteString(widthWord(k.Width))
		b.WriteString(" at ")
		b.WriteString(k.Range())
		if i == 0 && k.Lo == 1 && k.Hi == 1 {
			b.WriteString(" request")
		}
	}
	return b.String()
}

func widthWord(w int) string {
	if w <= Off {
		return "off"
	}
	return strconv.Itoa(w)
}
