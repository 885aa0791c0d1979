package main

import (
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/speclaunch/speclaunch/internal/policy"
)

// TestEmbeddedRecordsAreTheCitedOnes keeps main.go's embed list equal to
// the records policy.toml's entries cite (each .md and its .json twin): a
// new entry whose record is not embedded could not be checked from another
// directory, and a record nothing cites only makes the binary larger.
func TestEmbeddedRecordsAreTheCitedOnes(t *testing.T) {
	f, err := policy.Parse("policy.toml", policyTOML)
	if err != nil {
		t.Fatal(err)
	}
	var cited []string
	for _, e := range f.Entries {
		paths := append([]string{e.Record}, e.Records...)
		for _, c := range e.Cost {
			paths = append(paths, c.Record)
		}
		for _, p := range paths {
			if p != "" {
				cited = append(cited, p, strings.TrimSuffix(p, ".md")+".json")
			}
		}
	}
	slices.Sort(cited)
	cited = slices.Compact(cited)
	var embedded []string
	err = fs.WalkDir(records, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			embedded = append(embedded, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cited, embedded) {
		t.Errorf("main.go embeds %v\npolicy.toml cites %v\nmake main.go's //go:embed lines for records list exactly the cited files", embedded, cited)
	}
}
