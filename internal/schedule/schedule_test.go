package schedule

import (
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in, want, describe, err string
	}{
		{in: "4", want: "1+:4", describe: "width 4"},
		{in: "1:6,2-3:4,4+:1", want: "1:6,2-3:4,4+:1", describe: "width 6 at 1 request, 4 at 2-3, off at 4+"},
		{in: " 1-2 : 5 , 3+:2 ", want: "1-2:5,3+:2", describe: "width 5 at 1-2, 2 at 3+"},
		// "width" goes with the first width that drafts, never with "off".
		{in: "1:1,2+:4", want: "1:1,2+:4", describe: "off at 1 request, width 4 at 2+"},
		{in: "1-2:1,3-4:6,5+:1", want: "1-2:1,3-4:6,5+:1", describe: "off at 1-2, width 6 at 3-4, off at 5+"},
		{in: "", err: "empty"},
		{in: "99999999999999999999", err: `bucket 1 "99999999999999999999" has width 99999999999999999999, above 256, which no drafter runs`},
		{in: `"1:6,2+:1"`, err: "is in quotes: write it without them"},
		{in: `'4'`, err: "is in quotes"},
		{in: "1:99999999999999999999", err: `bucket 1 "1:99999999999999999999" has width 99999999999999999999, above 256`},
		// A load too large for an int is named as a load, the number alone:
		// Atoi's range error came before its syntax error, and the whole
		// text was read as a bare width. It is said as a load merely too
		// large is (TestOutOfRangeOneWording).
		{in: "99999999999999999999+:4", err: `bucket 1 "99999999999999999999+:4" starts at 99999999999999999999 requests in flight, above 1048576, more than any server runs`},
		{in: "99999999999999999999:4", err: `bucket 1 "99999999999999999999:4" starts at 99999999999999999999 requests in flight, above 1048576`},
		{in: "1:6,99999999999999999999+:1", err: `bucket 2 "99999999999999999999+:1" starts at 99999999999999999999 requests`},
		{in: "1:6,2-99999999999999999999:4,99999999999999999999+:1", err: `bucket 2 "2-99999999999999999999:4" ends at 99999999999999999999 requests in flight, above 1048576`},
		{in: "99999999999999999999+", err: `bucket 1 "99999999999999999999+": has no colon`},
		{in: "-99999999999999999999", err: "width -99999999999999999999 has a sign"},
		{in: "1:6,3+:2", err: "leaves load 2 without a width"},
		{in: "1:6,4+:2", err: "leaves loads 2-3 without a width: start this one at 2, or add a bucket for it"},
		{in: "1-3:6,3+:2", err: "overlaps"},
		{in: "1:6,2-3:4", err: "the last bucket ends at 3 requests in flight: end the schedule with an open bucket"},
		{in: "1:4", err: "the last bucket ends at 1 request in flight: end the schedule with an open bucket (2+"},
		{in: "1+:4,2+:3", err: "buckets follow it"},
		{in: "1:6,4-2:3,5+:1", err: "ends below where it starts: write the lower load first (2-4)"},
		// Buckets out of order are said so, in either form: "4+:1,1-3:6"
		// was told to start 4+ at 1.
		{in: "4+:1,1-3:6", err: `bucket 1 "4+:1" comes before bucket 2 "1-3:6", which starts at a lower load: list the buckets in ascending order of load`},
		{in: "2+:4", err: "leaves load 1"},
		// A bucket is named as written: "0:4" read as 0 to no bound
		// was said as "0+", a bucket the operator never wrote.
		{in: "0:4,1+:5", err: `bucket 1 "0:4" starts at 0 requests in flight: loads start at 1`},
		{in: "1:4,2000000+:1", err: `bucket 2 "2000000+:1" starts at 2000000 requests in flight, above 1048576, more than any server runs`},
		{in: "0-0:4", err: "write 1+ for no upper bound"},
		{in: "1:6, 3+:2", err: `bucket 2 "3+:2" leaves load 2 without a width`},
		{in: "1+:0", err: "width 0"},
		{in: "0", err: "width 0"},
		{in: "1+:300", err: "above 256"},
		{in: "1+4", err: "no colon"},
		{in: "a:4", err: "load is not"},
		{in: "1:x", err: "width is not"},
		// 0 is no upper bound only as hi in a triple: 2-0 was "not a
		// whole number or range".
		{in: "1:6,2-0:4", err: `bucket 2 "2-0:4": load 2-0 ends at 0: a range ends at a load of 1 or more; write 2+ for no upper bound (0 means none only as hi in a [lo, hi, width] triple)`},
		{in: "1-0:4", err: "load 1-0 ends at 0"},
		{in: "1-:4", err: "load is not a whole number or range"},
		// A sign or a leading zero is refused, though Atoi reads "+6" and
		// "06" as 6: "1:+6" (for 1+:6) was read as 1:6.
		{in: "1:+6", err: `bucket 1 "1:+6": width +6 has a sign: write the number alone (a load's + goes after it: 4+:1`},
		{in: "1:06", err: `bucket 1 "1:06": width 06 has a leading zero: write 6`},
		{in: "1:6,2+:00", err: "width 00 has a leading zero: write 0"},
		{in: "1:6,2+: -1", err: "width -1 has a sign"},
		{in: "+4", err: "width +4 has a sign"},
		{in: "-4", err: "width -4 has a sign"},
		{in: "04", err: "width 04 has a leading zero: write 4"},
		{in: "1:6,+2+:1", err: `bucket 2 "+2+:1": load +2 has a sign`},
		{in: "+1:6,2+:1", err: "load +1 has a sign"},
		{in: "-1:4", err: `bucket 1 "-1:4": load -1 has a sign`},
		{in: "1:4,", err: `bucket 2 "": is empty (a comma too many?)`},
		{in: "1:4,,2+:3", err: `bucket 2 "": is empty`},
		{in: "1:6,02-3:4,4+:1", err: "load 02 has a leading zero: write 2"},
		{in: "1:6,2-03:4,4+:1", err: "load 03 has a leading zero: write 3"},
		{in: "1:6,2--3:4,4+:1", err: "load -3 has a sign"},
		{in: "1:6,2-+3:4,4+:1", err: "load +3 has a sign"},
		{in: "1:6,010+:1", err: "load 010 has a leading zero: write 10"},
		{in: "1:10,2-10:8,11+:1", want: "1:10,2-10:8,11+:1", describe: "width 10 at 1 request, 8 at 2-10, off at 11+"},
		{in: strings.Repeat("1:2,", 70) + "2+:2", err: "above the limit of 64"},
		{in: strings.Repeat("9", 3000), err: "characters"},
	}
	for _, c := range cases {
		s, err := Parse(c.in, "test")
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%.30q) = %v, %v; want error containing %q", c.in, s, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", c.in, err)
			continue
		}
		if s.String() != c.want || s.Describe() != c.describe {
			t.Errorf("Parse(%q) = %q / %q; want %q / %q", c.in, s.String(), s.Describe(), c.want, c.describe)
		}
	}
}

func TestFromTriples(t *testing.T) {
	s, err := FromTriples([][]int{{1, 1, 6}, {2, 3, 4}, {4, 0, 1}}, "profile")
	if err != nil || s.String() != "1:6,2-3:4,4+:1" || s[2].Source != "profile" {
		t.Fatalf("FromTriples = %v, %v", s, err)
	}
	if _, err := FromTriples([][]int{{1, 0}}, ""); err == nil || !strings.Contains(err.Error(), "[lo, hi, width]") {
		t.Errorf("short triple: %v", err)
	}
	if _, err := FromTriples(nil, ""); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty: %v", err)
	}
	big := make([][]int, 100)
	for i := range big {
		big[i] = []int{i + 1, i + 1, 2}
	}
	if _, err := FromTriples(big, ""); err == nil || !strings.Contains(err.Error(), "100 buckets") {
		t.Errorf("100 buckets: %v", err)
	}
	// A bucket is named as written: [4, -1, 4] was said as "4--1".
	for _, c := range []struct {
		t    [][]int
		want string
	}{
		{[][]int{{1, 3, 8}, {4, -1, 4}}, "bucket 2 [4, -1, 4] ends at -1"},
		{[][]int{{0, 0, 4}}, "bucket 1 [0, 0, 4] starts at 0"},
		// Advice the triple form can follow: buckets out of order were
		// told to start [4, 0, 1] at 1, a hi below its lo to write the
		// text form's "2-4", and an empty schedule to write "1+:4".
		{[][]int{{4, 0, 1}, {1, 3, 6}}, "bucket 1 [4, 0, 1] comes before bucket 2 [1, 3, 6], which starts at a lower load: list the buckets in ascending order of load"},
		{[][]int{{1, 1, 6}, {4, 0, 1}, {2, 3, 4}}, "bucket 2 [4, 0, 1] comes before bucket 3 [2, 3, 4], which starts at a lower load"},
		{[][]int{{1, 3, 4}, {4, 2, 1}}, "bucket 2 [4, 2, 1] ends below where it starts: hi 2 is below lo 4; hi is the last load the bucket covers, at least its lo, or 0 for no upper bound: e.g. [4, 0, 1]"},
		{[][]int{{1, 3, 4}, {4, 2, 2}, {5, 0, 1}}, "bucket 2 [4, 2, 2] ends below where it starts: hi 2 is below lo 4; hi is the last load the bucket covers: give a hi of 4 or more"},
		{[][]int{}, "the schedule is empty: give at least one bucket, e.g. [[1, 0, 4]]"},
	} {
		if _, err := FromTriples(c.t, ""); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("FromTriples(%v): %v, want %q", c.t, err, c.want)
		}
	}
	if got := s.Triples(); len(got) != 3 || got[2][1] != 0 {
		t.Errorf("Triples = %v", got)
	}
}

func TestAtAndMerge(t *testing.T) {
	s, _ := Parse("1:6,2-3:4,4-7:4,8+:1", "tuned")
	for n, want := range map[int]int{0: 6, 1: 6, 2: 4, 3: 4, 5: 4, 8: 1, 1000: 1} {
		if got := s.At(n).Width; got != want {
			t.Errorf("At(%d) = %d, want %d", n, got, want)
		}
	}
	if m := s.Merge(); m.String() != "1:6,2-7:4,8+:1" {
		t.Errorf("Merge = %s", m)
	}
	if s.Max() != 6 || s.IsFlat() || !Flat(3, "x").IsFlat() {
		t.Errorf("Max/IsFlat wrong")
	}
	if (Schedule{}).At(3) != (Bucket{}) || (Schedule{}).Index(1) != -1 {
		t.Errorf("empty schedule lookup")
	}
}

// A load range is said with the count's own number.
func TestInFlight(t *testing.T) {
	for rng, want := range map[string]string{"1": "1 request in flight", "2-3": "2-3 requests in flight", "4+": "4+ requests in flight", "2": "2 requests in flight"} {
		if got := InFlight(rng); got != want {
			t.Errorf("InFlight(%q) = %q, want %q", rng, got, want)
		}
	}
}

// A number out of range is said in one wording, with the one bound,
// however large it is and whichever reader met it: validate's (2000000),
// TriplesOf's for one an int may not hold (past 2^31), OutOfRange's for
// one past int64 (the TOML decoders'), the text form's for one past int.
// They said "far out of range: loads go up to a few hundred requests",
// "names a load above 1048576" and "at most 1048576".
func TestOutOfRangeOneWording(t *testing.T) {
	const huge = "99999999999999999999"
	for _, c := range []struct {
		name   string
		number string
		err    func(n string) error
		want   string // with N for the number
	}{
		{"lo in a triple", "2000000", func(n string) error { return triples(t, "[[1, 1, 6], ["+n+", 0, 4]]") }, "bucket 2 [N, 0, 4] starts at N requests in flight, above 1048576, more than any server runs: start the bucket at a load a server sees (the first bucket at 1)"},
		{"lo past an int32", "4294967296", func(n string) error { return triples(t, "[[1, 1, 6], ["+n+", 0, 4]]") }, "bucket 2 [N, 0, 4] starts at N requests in flight, above 1048576, more than any server runs: start the bucket at a load a server sees (the first bucket at 1)"},
		{"lo past int64", huge, func(n string) error { return OutOfRange(2, 1, "["+n+", 0, 4]", n) }, "bucket 2 [N, 0, 4] starts at N requests in flight, above 1048576, more than any server runs: start the bucket at a load a server sees (the first bucket at 1)"},
		{"hi in a triple", "2000000", func(n string) error { return triples(t, "[[1, 1, 6], [2, "+n+", 4], [2000001, 0, 3]]") }, "bucket 2 [2, N, 4] ends at N requests in flight, above 1048576, more than any server runs: write N+ for no upper bound"},
		{"hi past an int32", "9223372036854775806", func(n string) error { return triples(t, "[[1, 1, 6], [2, "+n+", 4], [9223372036854775807, 0, 3]]") }, "bucket 2 [2, N, 4] ends at N requests in flight, above 1048576, more than any server runs: write N+ for no upper bound"},
		{"hi past int64", huge, func(n string) error { return OutOfRange(2, 2, "", n) }, "bucket 2 ends at N requests in flight, above 1048576, more than any server runs: write N+ for no upper bound"},
		{"hi in text", "2000000", func(n string) error { return parseErr("1:6,2-" + n + ":4,4+:1") }, `bucket 2 "2-N:4" ends at N requests in flight, above 1048576, more than any server runs: write N+ for no upper bound`},
		{"hi past int in text", huge, func(n string) error { return parseErr("1:6,2-" + n + ":4,4+:1") }, `bucket 2 "2-N:4" ends at N requests in flight, above 1048576, more than any server runs: write N+ for no upper bound`},
		{"width in a triple", "300", func(n string) error { return triples(t, "[[1, 0, "+n+"]]") }, "bucket 1 [1, 0, N] has width N, above 256, which no drafter runs"},
		{"width past int64", huge, func(n string) error { return OutOfRange(1, 3, "[1, 0, "+n+"]", n) }, "bucket 1 [1, 0, N] has width N, above 256, which no drafter runs"},
		{"width in text", "300", func(n string) error { return parseErr("1+:" + n) }, `bucket 1 "1+:N" has width N, above 256, which no drafter runs: write a width from 2 to 256, or 1 for speculation off`},
		{"width past int in text", huge, func(n string) error { return parseErr("1+:" + n) }, `bucket 1 "1+:N" has width N, above 256, which no drafter runs`},
		{"negative lo past int64", "-" + huge, func(n string) error { return OutOfRange(1, 1, "", n) }, "bucket 1 starts at N requests in flight: loads start at 1"},
		{"a fourth number past int64", huge, func(n string) error { return OutOfRange(1, 4, "", n) }, "bucket 1 has more than 3 numbers: write each bucket as [lo, hi, width]"},
	} {
		err := c.err(c.number)
		want := strings.ReplaceAll(c.want, "N", c.number)
		want = strings.ReplaceAll(want, c.number+"+ for", "N+ for") // the fix's N+ stays
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v\nwant %s", c.name, err, want)
		}
	}
}

// triples reads a schedule as TOML decodes [[lo, hi, width], ...] for
// TriplesOf, then FromTriples: the error of either.
func triples(t *testing.T, text string) error {
	t.Helper()
	var rows []any
	for _, row := range strings.Split(strings.Trim(text, "[]"), "], [") {
		var xs []any
		for _, x := range strings.Split(row, ", ") {
			n, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", text, err)
			}
			xs = append(xs, n)
		}
		rows = append(rows, xs)
	}
	ts, err := TriplesOf(rows)
	if err != nil {
		return err
	}
	_, err = FromTriples(ts, "")
	return err
}

func parseErr(text string) error {
	_, err := Parse(text, "")
	return err
}

// Each fault of one bucket says which (BucketOf), for a file's reader to
// name that bucket's line; a fault of the whole schedule says none. A
// bucket in brackets too many was told to write its number "without
// quotes or a decimal point", which it has none of.
func TestTriplesOfFaults(t *testing.T) {
	n := func(x int64) any { return x }
	row := func(xs ...any) any { return xs }
	for _, c := range []struct {
		name   string
		rows   []any
		bucket int
		want   string
	}{
		{"a bracket too many", []any{row(row(n(1), n(1), n(6))), row(n(2), n(0), n(4))}, 1,
			"bucket 1 number 1 is an array ([…]), not a whole number: a bucket is one [lo, hi, width] of whole numbers, one level of brackets per bucket"},
		{"a table for a number", []any{row(map[string]any{"lo": n(1)}, n(0), n(4))}, 1,
			"bucket 1 number 1 is a table ({…}), not a whole number: a bucket is one [lo, hi, width] of whole numbers, one level of brackets per bucket"},
		{"a string", []any{row(n(1), n(1), n(6)), row(n(2), n(0), "4")}, 2, `bucket 2 number 3 is a string ("4"), not a whole number: write it without quotes or a decimal point`},
		{"a bucket that is a number", []any{row(n(1), n(1), n(6)), n(5)}, 2, "bucket 2 is an integer, not [lo, hi, width]"},
		{"two numbers", []any{row(n(1), n(1), n(6)), row(n(2), n(0))}, 2, "bucket 2 has 2 numbers"},
		{"past an int", []any{row(n(1), n(0), n(1<<40))}, 1, "bucket 1 [1, 0, 1099511627776] has width 1099511627776, above 256"},
		{"a width of 0", []any{row(n(1), n(1), n(6)), row(n(2), n(0), n(0))}, 2, "bucket 2 [2, 0, 0] has width 0"},
		{"bounded at the end", []any{row(n(1), n(1), n(6)), row(n(2), n(3), n(4))}, 2, "the last bucket ends at 3 requests in flight"},
		{"empty", []any{}, 0, "the schedule is empty"},
	} {
		ts, err := TriplesOf(c.rows)
		if err == nil {
			_, err = FromTriples(ts, "")
		}
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || BucketOf(err) != c.bucket {
			t.Errorf("%s: %v (bucket %d), want %q (bucket %d)", c.name, err, BucketOf(err), c.want, c.bucket)
		}
	}
	if got := BucketOf(OutOfRange(3, 2, "", "99999999999999999999")); got != 3 {
		t.Errorf("OutOfRange's bucket = %d, want 3", got)
	}
}

// A load read below one request in flight (an idle server's, which falls
// in the first bucket) is said with "or none".
func TestInFlightAt(t *testing.T) {
	for _, tc := range []struct {
		rng  string
		mean float64
		want string
	}{
		{"1", 1, "1 request in flight"},
		{"1", 0, "1 request in flight or none"},
		{"1-3", 0.4, "1-3 requests in flight or none"},
		{"2-4", 3.9, "2-4 requests in flight"},
	} {
		if got := InFlightAt(tc.rng, tc.mean); got != tc.want {
			t.Errorf("InFlightAt(%q, %v) = %q, want %q", tc.rng, tc.mean, got, tc.want)
		}
	}
}
