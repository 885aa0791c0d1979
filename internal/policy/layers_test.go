package policy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDistinct(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.toml"), filepath.Join(dir, "b.toml")
	link := filepath.Join(dir, "l.toml")
	os.WriteFile(a, nil, 0o644)
	os.WriteFile(b, nil, 0o644)
	os.Symlink(a, link)
	got := Distinct([]string{a, b, a, link, b, filepath.Join(dir, ".", "a.toml")})
	if want := []int{4, 5}; !slices.Equal(got, want) {
		t.Errorf("Distinct = %v, want %v (the last place of each file)", got, want)
	}
}

// Issue 33: a profile naming one 20,000-entry file 80 times took the
// launcher out of memory. A file named again is read once (Distinct); the
// layers are bounded in files, bytes and entries, and the refusal names
// the file that went past.
func TestBudget(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	small := write("small.toml", bigPolicy(1, "s"))
	t.Run("files", func(t *testing.T) {
		var b Budget
		var err error
		for i := 0; i <= MaxLayerFiles && err == nil; i++ {
			_, err = b.Read(context.Background(), write("f"+string(rune('a'+i))+".toml", bigPolicy(1, "f")))
		}
		var le *LayerError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), "more than 16 distinct policy files") {
			t.Fatalf("err = %v", err)
		}
	})
	// The tuned layer counts as one of the 16, and the refusal says so
	// with its path: it is the one file the operator did not name.
	for _, tc := range []struct {
		name  string
		tuned bool
		want  []string
		not   string
	}{
		{"files, the tuned layer among them", true, []string{"more than 16 distinct policy files are layered (policy.files, MLXCEL_POLICY and --policy count, each file once, and so does the tuned layer " + filepath.Join(dir, "tuned.toml") + " (written by speclaunch tune))"}, ""},
		{"files, no tuned layer", false, []string{"more than 16 distinct policy files are layered (policy.files, MLXCEL_POLICY and --policy count, each file once)"}, "tuned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b Budget
			n := MaxLayerFiles
			if tc.tuned {
				if _, _, err := b.ReadTuned(context.Background(), write("tuned.toml", bigPolicy(1, "t"))); err != nil {
					t.Fatal(err)
				}
				n--
			}
			for i := range n {
				if _, err := b.Read(context.Background(), write(fmt.Sprintf("g%d.toml", i), bigPolicy(1, "g"))); err != nil {
					t.Fatalf("file %d of %d: %v", i+1, n, err)
				}
			}
			_, err := b.Read(context.Background(), write("last.toml", bigPolicy(1, "l")))
			if err == nil {
				t.Fatal("accepted past the bound")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v\nwant %q", err, w)
				}
			}
			if tc.not != "" && strings.Contains(err.Error(), tc.not) {
				t.Errorf("err = %v names %q", err, tc.not)
			}
		})
	}
	t.Run("entries", func(t *testing.T) {
		big := write("big.toml", bigPolicy(51, "b"))
		b := Budget{MaxEntries: 100}
		if _, err := b.Read(context.Background(), big); err != nil {
			t.Fatal(err)
		}
		_, err := b.Read(context.Background(), big)
		var le *LayerError
		if !errors.As(err, &le) || le.Path != big {
			t.Fatalf("err = %v, want a LayerError naming %s", err, big)
		}
		if !strings.Contains(err.Error(), "more than 100 entries in all (51 before this file's 51;") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("bytes", func(t *testing.T) {
		var b Budget
		var err error
		// 3 × 3.37 MiB: the third is past 8 MiB, after 6.74 MiB, said to a
		// tenth ("6 MiB before this one" did not add up)
		for i := 0; i < 3 && err == nil; i++ {
			pad := write("pad"+string(rune('a'+i))+".toml", []byte("schema = 1\n#"+strings.Repeat("x", 3533690)+"\n"))
			_, err = b.Read(context.Background(), pad)
		}
		var le *LayerError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), "more than 8 MiB in all (6.7 MiB before this one;") {
			t.Fatalf("err = %v, want the total bytes refused, with the bytes before it to a tenth of a MiB", err)
		}
		if _, err := b.Read(context.Background(), small); err != nil {
			t.Errorf("a small file within the bytes left: %v", err)
		}
	})
}

// An empty tuned layer (no bytes, or only whitespace and comments) is no
// layer: ReadTuned says so and counts nothing; anything else in it needs
// its schema, and Read (any other policy file) refuses an empty one.
func TestReadTunedEmpty(t *testing.T) {
	dir := t.TempDir()
	for i, tc := range []struct {
		name, text string
		empty      bool
		err        string // "" for none
	}{
		{"no bytes", "", true, ""},
		{"whitespace", " \n\t\r\n\n", true, ""},
		{"comments", "# speclaunch's tuned layer\n  # emptied by hand\n", true, ""},
		{"a byte-order mark and a comment", "\ufeff# x\n", true, ""},
		{"a comment without a newline", "#", true, ""},
		{"schema alone", "schema = 1\n", false, ""},
		{"an entry after comments", "# x\n\n  [[entry]]\n  id = \"x\"\n", false, "missing schema"},
		{"a table header", "[[entry]]\n", false, "missing schema"},
		{"an unclosed string", "# x\n\"\n", false, "invalid TOML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("t%d.toml", i))
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := blank([]byte(tc.text)); got != tc.empty {
				t.Errorf("blank = %v, want %v", got, tc.empty)
			}
			var b Budget
			f, empty, err := b.ReadTuned(context.Background(), path)
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("err = %v, want %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Errorf("err = %v", err)
			case empty != tc.empty || empty && (f != nil || b.files != 0 || b.tuned != ""):
				t.Errorf("empty %v (file %v, %d files counted, tuned %q), want %v and nothing counted", empty, f, b.files, b.tuned, tc.empty)
			}
			if _, err := (&Budget{}).Read(context.Background(), path); tc.empty && err == nil {
				t.Error("Read took an empty file without its schema")
			}
		})
	}
}

// The bytes before a refused file are said to a tenth of a MiB, rounded
// down: never more than were read, and 6.74 MiB is no longer "6 MiB".
func TestTenthsMiB(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0.0"},
		{7067406, "6.7"}, // 6.74 MiB
		{8<<20 - 1, "7.9"},
		{8 << 20, "8.0"},
		{3 << 19, "1.5"},
	} {
		if got := tenthsMiB(tc.n); got != tc.want {
			t.Errorf("tenthsMiB(%d) = %s, want %s", tc.n, got, tc.want)
		}
	}
}
