package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/speclaunch/speclaunch/internal/record"
	"github.com/speclaunch/speclaunch/internal/safefile"
)

// Write renders rec and writes outBase.md, outBase.json and outBase.svg.
// It refuses what CheckWritable refuses, and when any of them exists unless
// force is set: a record backs a policy entry, and silently replacing one
// would orphan the entry's proof.
// Everything is rendered before anything is written, so a rendering error
// leaves no partial set behind. An empty rec.Name is set from outBase (and
// the entry block, which cites the file, follows).
func Write(rec *record.Record, outBase string, force bool) error {
	if outBase == "" {
		return errors.New("write record: empty output name")
	}
	if err := CheckWritable(outBase); err != nil {
		return fmt.Errorf("write record: %w", err)
	}
	// Prose as a record holds it: a wrapped paragraph of --notes-file, an
	// error's text in a harness note, on one line (record.Validate).
	rec.Title = record.OneLine(rec.Title)
	for i, n := range rec.Notes {
		rec.Notes[i] = record.OneLine(n)
	}
	name := filepath.Base(outBase)
	if rec.Name == "" {
		rec.Name = name
		if rec.Verdict.EarnsEntry {
			rec.Verdict.Entry = EntryBlock(rec, rec.Verdict.Best, rec.Verdict.RunnerUp)
		}
	}
	paths := []string{outBase + ".md", outBase + ".json", outBase + ".svg"}
	if !force {
		for _, p := range paths {
			if _, err := os.Lstat(p); err == nil {
				return fmt.Errorf("write record: %s exists; pass --force to overwrite it", p)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("write record: %w", err)
			}
		}
	}
	js, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("write record: encode json: %w", err)
	}
	svg, err := RenderSVG(rec)
	if err != nil {
		return fmt.Errorf("write record: %w", err)
	}
	data := [][]byte{RenderMarkdown(rec), append(js, '\n'), svg}
	for i, p := range paths {
		if err := safefile.WriteFile(p, data[i], 0o644); err != nil {
			return fmt.Errorf("write record: %w", err)
		}
	}
	return nil
}

// CheckWritable says, before a run, whether Write could create outBase's
// files: a sweep takes hours on real hardware, and an output path that
// cannot be written must not be found at its end. outBase is a stem, not a
// directory: "DIR/" wrote the hidden DIR/.md, DIR/.json and DIR/.svg, and
// an existing DIR wrote DIR.md beside it. Its directory must exist (Write
// makes none: a mistyped parent is refused, not created) and take a new
// file, and none of the three files may be a directory.
func CheckWritable(outBase string) error {
	if strings.HasSuffix(outBase, string(filepath.Separator)) || strings.HasSuffix(outBase, "/") {
		return fmt.Errorf("%s names a directory, and a record is three files named from a stem", outBase)
	}
	if fi, err := os.Stat(outBase); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory, and a record is three files named from a stem", outBase)
	} else if err == nil && !fi.Mode().IsRegular() {
		// --out /dev/null wrote /dev/null.md, .json and .svg.
		return fmt.Errorf("%s is not a regular file (a device, a FIFO or a socket), and a record is three files named from a stem", outBase)
	}
	for _, ext := range []string{".md", ".json", ".svg"} {
		if fi, err := os.Stat(outBase + ext); err == nil && fi.IsDir() {
			return fmt.Errorf("%s is a directory", outBase+ext)
		}
	}
	return safefile.CheckDir(filepath.Dir(outBase))
}
