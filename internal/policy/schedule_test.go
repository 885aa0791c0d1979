package policy

import (
	"strconv"
	"strings"
	"testing"
)

func scheduleEntry(sched string) string {
	return "schema = 1\n\n[[entry]]\nid = \"h200-q4\"\nengine = \"llama.cpp\"\ndrafter = \"draft\"\ncapability = \"9.0\"\nquant = \"q4_0\"\n" +
		sched + "\npin = \"llama.cpp d32676d\"\nrecord = \"docs/benchmark_results/x.md\"\n"
}

// A schedule entry carries every bucket; a width entry is one bucket.
func TestParseScheduleEntry(t *testing.T) {
	f, err := Parse("p.toml", []byte(scheduleEntry("schedule = [[1, 1, 6], [2, 3, 4], [4, 0, 1]]")))
	if err != nil {
		t.Fatal(err)
	}
	e := f.Entries[0]
	if e.Schedule.String() != "1:6,2-3:4,4+:1" || e.Width != 6 || e.Schedule[2].Source != "measured" {
		t.Fatalf("entry = %+v", e)
	}
	if got := Merge(f).Explain(e.Key); !strings.Contains(strings.Join(got, "\n"), "width 6 at 1 request, 4 at 2-3, off at 4+") ||
		!strings.Contains(strings.Join(got, "\n"), "  at 1 request in flight: width 6\n  at 2-3 requests in flight: width 4\n  at 4+ requests in flight: width 1 (speculation off)") {
		t.Errorf("explain = %q", got)
	}
	// Off at one request: the entry's width is its widest.
	f, err = Parse("p.toml", []byte(scheduleEntry("schedule = [[1, 2, 1], [3, 0, 3]]")))
	if err != nil || f.Entries[0].Width != 3 {
		t.Fatalf("off at one request: %v, %+v", err, f)
	}
	f, err = Parse("p.toml", []byte(scheduleEntry("width = 5")))
	if err != nil || f.Entries[0].Schedule != nil || f.Entries[0].Sched().String() != "1+:5" {
		t.Fatalf("width entry: %v, %+v", err, f)
	}
}

// Every bad schedule is refused at its line with the fix.
func TestParseRejectsSchedules(t *testing.T) {
	many := "schedule = ["
	for i := 1; i <= 70; i++ {
		many += "[" + itoa(i) + ", " + itoa(i) + ", 2], "
	}
	many += "[71, 0, 2]]"
	cases := []struct{ sched, want string }{
		{"schedule = [[1, 1, 6], [3, 0, 1]]", "leaves load 2 without a width"},
		{"schedule = [[1, 3, 6], [3, 0, 1]]", "overlaps the bucket before it"},
		{"schedule = [[1, 1, 6], [4, 2, 3], [5, 0, 1]]", "ends below where it starts"},
		{"schedule = []", "the schedule is empty"},
		{"schedule = [[1, 0, 0]]", "width 0"},
		{"schedule = [[1, 1, 6], [2, 0, -1]]", "width -1"},
		{"schedule = [[1, 0, 1]]", "off (width 1) at every load"},
		{"schedule = [[1, 1, 6], [2, 5, 4]]", "end the schedule with an open bucket"},
		{"schedule = [[1, 6]]", "[lo, hi, width]"},
		{"schedule = [[1, 0, 2.5]]", "is a float (2.5), not a whole number"},
		{`schedule = [["1", 0, 4]]`, `is a string ("1"), not a whole number`},
		{"schedule = [[1, 4294967296, 4], [4294967297, 0, 1]]", "bucket 1 [1, 4294967296, 4] ends at 4294967296 requests in flight, above 1048576, more than any server runs"},
		{"schedule = [[1, 0, 4], 5]", "bucket 2 is an integer, not [lo, hi, width]"},
		{"schedule = \"1:6\"", "must be an array"},
		{"schedule = [[1, 0, 4]]\nwidth = 4", "width or schedule, not both"},
		{many, "above the limit of 64"},
	}
	for _, c := range cases {
		_, err := Parse("p.toml", []byte(scheduleEntry(c.sched)))
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "p.toml:9: ") {
			t.Errorf("%s: err = %v, want p.toml:9 and %q", c.sched, err, c.want)
		}
	}
}

// A fault of one bucket of a schedule written over several lines names
// that bucket's line, in a policy file's entry (the second, whose lines
// Line alone would take for the first's) and in a profile's, where it was
// the line of "schedule = [". A fault of the whole schedule keeps it.
func TestParseScheduleBucketLine(t *testing.T) {
	first := "[[entry]]\nid = \"first\"\nengine = \"llama.cpp\"\ndrafter = \"draft\"\ncapability = \"8.9\"\nquant = \"q4_0\"\nwidth = 4\npin = \"p\"\nrecord = \"docs/benchmark_results/x.md\"\n\n[[entry]]"
	for _, c := range []struct {
		name, sched string
		line        int // in the second entry, whose schedule starts on line 19
		want        string
	}{
		{"a bad width", "schedule = [\n  [1, 1, 6],\n  [2, 0, 0],\n]", 21, "bucket 2 [2, 0, 0] has width 0"},
		{"a comment between", "schedule = [ # lo, hi, width\n  [1, 1, 6],\n  # the rest\n  [3, 0, 4],\n]", 22, "bucket 2 [3, 0, 4] leaves load 2 without a width"},
		{"a bracket too many", "schedule = [\n  [[1, 1, 6]],\n  [2, 0, 4],\n]", 20, "bucket 1 number 1 is an array"},
		{"out of order", "schedule = [\n  [4, 0, 1],\n  [1, 3, 6],\n]", 20, "bucket 1 [4, 0, 1] comes before bucket 2"},
		{"one line", "schedule = [[1, 1, 6], [2, 0, 0]]", 19, "bucket 2 [2, 0, 0] has width 0"},
		{"off at every load", "schedule = [\n  [1, 1, 1],\n  [2, 0, 1],\n]", 19, "off (width 1) at every load"},
	} {
		text := strings.Replace(scheduleEntry(c.sched), "[[entry]]", first, 1)
		_, err := Parse("p.toml", []byte(text))
		if err == nil || !strings.HasPrefix(err.Error(), "p.toml:"+itoa(c.line)+": ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want p.toml:%d and %q", c.name, err, c.line, c.want)
		}
	}
	// A profile's [[policy.entry]]: the line its reader gives for the bucket.
	m := map[string]any{"id": "p", "engine": "mlxcel", "drafter": "dflash", "capability": "12.1", "quant": "affine", "record": "docs/benchmark_results/x.md",
		"schedule": []any{[]any{int64(1), int64(1), int64(6)}, []any{int64(2), int64(0), int64(0)}}}
	at := func(i int, k string, b int) int { return 30 + 10*i + b }
	_, err := ParseProfileEntries("prof.toml", []map[string]any{m}, []int{7}, []map[string]int{{"schedule": 12}}, at)
	if err == nil || !strings.HasPrefix(err.Error(), "prof.toml:32: schedule: bucket 2 [2, 0, 0] has width 0") {
		t.Errorf("profile entry: err = %v, want prof.toml:32", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A schedule's number past int64 is said as one merely too large is, the
// bucket, the bound and the example, at the number's line (the decoder's,
// as a profile's: profiles/profile_test.go), in any entry: the decoder
// refuses it first, and it was "p.toml:9: invalid TOML:
// 99999999999999999999 is out of range for int64; fix the syntax on this
// line".
func TestParseScheduleNumberPastInt64(t *testing.T) {
	const huge = "99999999999999999999"
	for _, c := range []struct {
		name, sched string
		line        string
	}{
		{"a load", "schedule = [[1, 1, 6], [N, 0, 4]]", "p.toml:19: "},
		{"a width", "schedule = [[1, 0, N]]", "p.toml:19: "},
		{"a bucket on a line of its own", "schedule = [\n  [1, 1, 6],\n  [2, 0, N],\n]", "p.toml:21: "},
	} {
		msg := func(n string) string {
			// A first entry, so that the schedule is the second's.
			text := strings.Replace(scheduleEntry(strings.ReplaceAll(c.sched, "N", n)), "[[entry]]", "[[entry]]\nid = \"first\"\nengine = \"llama.cpp\"\ndrafter = \"draft\"\ncapability = \"8.9\"\nquant = \"q4_0\"\nwidth = 4\npin = \"p\"\nrecord = \"docs/benchmark_results/x.md\"\n\n[[entry]]", 1)
			_, err := Parse("p.toml", []byte(text))
			if err == nil {
				t.Fatalf("%s: no error", c.name)
			}
			return strings.ReplaceAll(err.Error(), n, "N")
		}
		got, want := msg(huge), msg("2000000")
		if !strings.HasPrefix(got, c.line) || !strings.Contains(got, "e.g. schedule = [[1, 1, 6]") {
			t.Errorf("%s: %s, want %s… and the example", c.name, got, c.line)
		}
		// Past the file:line, the message of a number merely too large.
		_, gotWhy, _ := strings.Cut(got, ": ")
		_, wantWhy, _ := strings.Cut(want, ": ")
		if gotWhy != wantWhy {
			t.Errorf("%s:\n got %s\nwant %s", c.name, gotWhy, wantWhy)
		}
	}
}
