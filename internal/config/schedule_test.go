package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The schedule layers as every setting does (flag > env > profile), reads
// triples or the text form from a profile, and meets an operator width by
// this rule: one layer holding both is an error, two
// layers keep the higher.
func TestScheduleLayering(t *testing.T) {
	triples := "[draft]\nmodel = \"d\"\nschedule = [[1, 1, 6], [2, 3, 4], [4, 0, 1]]\n"
	text := "[draft]\nmodel = \"d\"\nschedule = \"1-2:5,3+:2\"\n"
	both := "[draft]\nmodel = \"d\"\nblock_size = 4\nschedule = \"1:6,2+:3\"\n"
	cases := []struct {
		name    string
		flags   map[string]string
		env     map[string]string
		profile string
		sched   string // "" = none
		src     string
		width   int
		err     string
		notice  string
	}{
		{name: "none", sched: "", src: "default"},
		{name: "profile triples", profile: triples, sched: "1:6,2-3:4,4+:1", src: "profile p.toml:3"},
		{name: "profile text", profile: text, sched: "1-2:5,3+:2", src: "profile p.toml:3"},
		{name: "env over profile", profile: triples, env: map[string]string{"MLXCEL_DRAFT_SCHEDULE": "1:8,2+:2"}, sched: "1:8,2+:2", src: "env MLXCEL_DRAFT_SCHEDULE"},
		{name: "flag over env", flags: map[string]string{"draft-schedule": "1+:3"}, env: map[string]string{"MLXCEL_DRAFT_SCHEDULE": "1:8,2+:2"}, sched: "1+:3", src: "flag --draft-schedule"},
		{name: "width and schedule in one profile", profile: both, err: "profile p.toml:4: draft.schedule: a width (profile p.toml:3) and a schedule were both given"},
		{name: "width and schedule as flags", flags: map[string]string{"draft-schedule": "1:6,2+:3", "draft-block-size": "4"}, err: "both given"},
		{name: "env width over profile schedule", profile: triples, env: map[string]string{"MLXCEL_DRAFT_BLOCK_SIZE": "5"}, width: 5, src: "default", notice: "keeping the width"},
		{name: "flag schedule over env width", flags: map[string]string{"draft-schedule": "1:6,2+:3"}, env: map[string]string{"MLXCEL_DRAFT_BLOCK_SIZE": "5"}, sched: "1:6,2+:3", src: "flag --draft-schedule", notice: "keeping the schedule"},
		{name: "bad text names the variable", env: map[string]string{"MLXCEL_DRAFT_SCHEDULE": "1:6,3+:2"}, err: "env MLXCEL_DRAFT_SCHEDULE: bad draft schedule: bucket 2 \"3+:2\" leaves load 2"},
		{name: "bad triples name the line", profile: "[draft]\nschedule = [[1, 2, 6], [2, 0, 2]]\n", err: "profile p.toml:2: bad draft.schedule: bucket 2 [2, 0, 2] overlaps"},
		{name: "short triple", profile: "[draft]\nschedule = [[1, 6]]\n", err: "[lo, hi, width]"},
		{name: "a float", profile: "[draft]\nschedule = [[1, 0, 2.5]]\n", err: "is a float (2.5), not a whole number"},
		{name: "a whole float", profile: "[draft]\nschedule = [[1, 0, 8.0]]\n", err: "is a float (8.0), not a whole number"},
		{name: "a negative end", profile: "[draft]\nschedule = [[1, 3, 8], [4, -1, 4]]\n", err: "bucket 2 [4, -1, 4] ends at -1: a bucket ends at a load of 1 or more, or 0 for no upper bound"},
		{name: "a quoted number", profile: "[draft]\nschedule = [[\"1\", 0, 4]]\n", err: `bucket 1 number 1 is a string ("1"), not a whole number`},
		{name: "a huge number", profile: "[draft]\nschedule = [[1, 4294967296, 4], [4294967297, 0, 1]]\n", err: "bucket 1 [1, 4294967296, 4] ends at 4294967296 requests in flight, above 1048576"},
		{name: "a huge width in text", flags: map[string]string{"draft-schedule": "1:99999999999999999999"}, err: `flag --draft-schedule: bad draft schedule: bucket 1 "1:99999999999999999999" has width 99999999999999999999, above 256`},
		{name: "not an array", profile: "[draft]\nschedule = 4\n", err: "profile p.toml:2: bad draft.schedule: it is an integer, not an array of [lo, hi, width] or a string; write it e.g. as draft.schedule = [[1, 1, 6]"},
		{name: "a flat array", profile: "[draft]\nschedule = [1, 2]\n", err: "bucket 1 is an integer, not [lo, hi, width]"},
		{name: "off everywhere", flags: map[string]string{"draft-schedule": "1+:1"}, err: "off (width 1) at every load"},
		// The text form refuses a sign or a leading zero wherever it is
		// typed; TOML's own integers in triples keep TOML's rules (+6 is 6).
		{name: "a signed width in the variable", env: map[string]string{"MLXCEL_DRAFT_SCHEDULE": "1:+6"}, err: "env MLXCEL_DRAFT_SCHEDULE: bad draft schedule: bucket 1 \"1:+6\": width +6 has a sign"},
		{name: "a leading zero in the flag", flags: map[string]string{"draft-schedule": "1:06,2+:1"}, err: "flag --draft-schedule: bad draft schedule: bucket 1 \"1:06\": width 06 has a leading zero: write 6"},
		{name: "a sign in the profile's text", profile: "[draft]\nschedule = \"1:6,+2+:1\"\n", err: "profile p.toml:2: bad draft.schedule: bucket 2 \"+2+:1\": load +2 has a sign"},
		// Spaces are a value set (an empty one counts as unset), and the
		// fix takes it back where it was given: docs/schedule.md.
		{name: "spaces in the variable", env: map[string]string{"MLXCEL_DRAFT_SCHEDULE": " "}, err: "env MLXCEL_DRAFT_SCHEDULE: bad draft schedule: the schedule is empty: write it as load:width pairs, e.g. \"1:6,2-3:4,4+:1\", or unset the variable (or set it empty)"},
		{name: "spaces in the flag", flags: map[string]string{"draft-schedule": " "}, err: "flag --draft-schedule: bad draft schedule: the schedule is empty: write it as load:width pairs, e.g. \"1:6,2-3:4,4+:1\", or leave the flag out"},
		{name: "TOML's signed integers in triples", profile: "[draft]\nmodel = \"d\"\nschedule = [[+1, 1, +6], [2, 0, +1]]\n", sched: "1:6,2+:1", src: "profile p.toml:3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Flags: c.flags, Getenv: env(c.env)}
			if c.profile != "" {
				in.Profile = prof(t, c.profile)
			}
			s, _, notices, err := Load(in)
			if c.err != "" {
				var ce *Error
				if err == nil || !strings.Contains(err.Error(), c.err) || !errors.As(err, &ce) {
					t.Fatalf("err = %v, want a config error containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Schedule.Value.String(); got != c.sched || s.Schedule.Src.String() != c.src || s.Width.Value != c.width {
				t.Errorf("schedule %q (%s), width %d; want %q (%s), %d", got, s.Schedule.Src, s.Width.Value, c.sched, c.src, c.width)
			}
			if c.sched != "" && s.Schedule.Value[0].Source != "override" {
				t.Errorf("bucket source %q", s.Schedule.Value[0].Source)
			}
			var all []string
			for _, n := range notices {
				all = append(all, n.Msg)
			}
			if c.notice != "" && !strings.Contains(strings.Join(all, "\n"), c.notice) {
				t.Errorf("notices %q lack %q", all, c.notice)
			}
		})
	}
}

// Every fault of a profile's draft.schedule is said alike: the source
// with its line, the key, why in one wording for a number out of range
// with the one bound, and an example of both forms; no separate hint. A
// number past int64 and a table, which the profile's decoder meets
// first, read "hugeint.toml:9: ..." with a hint line and no example, a
// number past an int "far out of range: loads go up to a few hundred
// requests", one merely too large "names a load above 1048576", and a
// huge float was said in 31 digits.
func TestProfileScheduleFaultsReadAlike(t *testing.T) {
	const example = `; write it e.g. as draft.schedule = [[1, 1, 6], [2, 3, 4], [4, 0, 1]] (hi 0 = no upper bound, width 1 = speculation off at that load) or draft.schedule = "1:6,2-3:4,4+:1"`
	for _, c := range []struct{ name, sched, why string }{
		{"a load past int64", "[[1, 1, 6], [99999999999999999999, 0, 4]]", "bucket 2 [99999999999999999999, 0, 4] starts at 99999999999999999999 requests in flight, above 1048576, more than any server runs"},
		{"a load past an int32", "[[1, 1, 6], [2, 9223372036854775806, 4], [9223372036854775807, 0, 3]]", "bucket 2 [2, 9223372036854775806, 4] ends at 9223372036854775806 requests in flight, above 1048576, more than any server runs"},
		{"a load too large", "[[1, 1, 6], [2, 2000000, 4], [2000001, 0, 3]]", "bucket 2 [2, 2000000, 4] ends at 2000000 requests in flight, above 1048576, more than any server runs"},
		{"a load too large in text", `"1:6,2-2000000:4,2000001+:3"`, `bucket 2 "2-2000000:4" ends at 2000000 requests in flight, above 1048576, more than any server runs`},
		{"a load past int in text", `"1:6,2-99999999999999999999:4,4+:3"`, `bucket 2 "2-99999999999999999999:4" ends at 99999999999999999999 requests in flight, above 1048576, more than any server runs`},
		{"a width past int64", "[[1, 0, 99999999999999999999]]", "bucket 1 [1, 0, 99999999999999999999] has width 99999999999999999999, above 256, which no drafter runs"},
		{"a table", "{lo = 1, hi = 0, width = 4}", "it is a table, not an array of [lo, hi, width] or a string"},
		{"a huge float", "[[1, 0, 1e30]]", "bucket 1 number 3 is a float (1e+30), not a whole number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "hugeint.toml")
			text := "[engine]\nname = \"sim\"\n\n[draft]\nmodel = \"d\"\nschedule = " + c.sched + "\n"
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, _, err := Load(Input{Flags: map[string]string{"profile": path}, Getenv: env(nil)})
			var ce *Error
			want := "profile " + path + ":6: bad draft.schedule: " + c.why
			if !errors.As(err, &ce) || !strings.HasPrefix(err.Error(), want) || !strings.HasSuffix(err.Error(), example) {
				t.Errorf("err = %v\nwant a config error %s...%s", err, want, example)
			}
		})
	}
}

// A fault of one bucket of a schedule written over several lines names
// that bucket's line: "schedule = [" on line 6 and [2, 0, 0] on line 8
// was said as line 6. A fault of the whole schedule keeps the key's line.
func TestProfileScheduleBucketLine(t *testing.T) {
	for _, c := range []struct {
		name, sched string
		line        int
		why         string
	}{
		{"a bad width", "[\n  [1, 1, 6],\n  [2, 0, 0],\n]", 8, "bucket 2 [2, 0, 0] has width 0"},
		{"a gap", "[\n  [1, 1, 6], # one client\n\n  [3, 0, 4],\n]", 9, "bucket 2 [3, 0, 4] leaves load 2 without a width"},
		{"a number that is no number", "[\n  [1, 1, 6],\n  [2, 0, \"4\"],\n]", 8, "bucket 2 number 3 is a string"},
		{"a bracket too many", "[\n  [[1, 1, 6]],\n  [2, 0, 4],\n]", 7, "bucket 1 number 1 is an array"},
		{"a bucket of two numbers", "[\n  [1, 1, 6],\n  [2, 0],\n]", 8, "bucket 2 has 2 numbers"},
		{"one line", "[[1, 1, 6], [2, 0, 0]]", 6, "bucket 2 [2, 0, 0] has width 0"},
		{"the last bucket bounded", "[\n  [1, 1, 6],\n  [2, 3, 4],\n]", 8, "the last bucket ends at 3 requests in flight"},
		{"empty", "[\n]", 6, "the schedule is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "multi.toml")
			text := "[engine]\nname = \"sim\"\n\n[draft]\nmodel = \"d\"\nschedule = " + c.sched + "\n"
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, _, err := Load(Input{Flags: map[string]string{"profile": path}, Getenv: env(nil)})
			want := fmt.Sprintf("profile %s:%d: bad draft.schedule: %s", path, c.line, c.why)
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("err = %v\nwant %s...", err, want)
			}
		})
	}
}
