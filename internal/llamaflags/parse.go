// Package llamaflags knows llama-server's command-line flags: each name and
// whether it takes a value. The launcher's argv pre-pass uses it to pass the
// flags a llama-server user types (-ngl 99, -c 8192, --jinja) through to the
// engine with the right number of tokens, since that cannot be guessed:
// --jinja takes no value, -ngl does.
//
// The table (table.go) is generated from llama-server's own --help, captured
// from two llama.cpp trees and committed under
// internal/fakellama/testdata/{new,old}-help.txt; `go generate` rebuilds it.
// Values knows a flag either tree lists; ListedBy says which tree's does.
package llamaflags

//go:generate go run ./gen -o table.go ../fakellama/testdata/new-help.txt ../fakellama/testdata/old-help.txt

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Flag is one llama-server option: every name it answers to and whether it
// takes a value.
type Flag struct {
	Names  []string // "-ngl", "--gpu-layers", "--n-gpu-layers"
	Values int      // how many tokens follow it: 0 (--jinja), 1 (-ngl N), 2 (--control-vector-layer-range START END)
	Hint   string   // the values' placeholder in --help, e.g. "N", "FNAME", "START END"
	Env    string   // the variable llama-server also reads it from, e.g. "LLAMA_ARG_CTX_SIZE"; "" for none
	// Removed is the description of a flag the --help lists as a removed
	// stub ("the argument has been removed. use ..."), which llama-server
	// refuses to start on; "" for a flag it takes.
	Removed string
}

// removedStub begins the description of a flag llama-server's --help
// lists only to refuse it.
const removedStub = "the argument has been removed"

// countValues counts the placeholders in a hint: words separated by
// spaces outside brackets, so "START END" is two and
// "<tensor name pattern>=<buffer type>,..." is one.
func countValues(hint string) int {
	n, depth, inWord := 0, 0, false
	for _, r := range hint {
		switch {
		case r == '<' || r == '[' || r == '{':
			depth++
		case (r == '>' || r == ']' || r == '}') && depth > 0:
			depth--
		case r == ' ' && depth == 0:
			inWord = false
			continue
		}
		if !inWord {
			n, inWord = n+1, true
		}
	}
	return n
}

// headRE matches an option line of `llama-server --help`: names separated
// by ", " (short names are padded with spaces after the comma), then the
// value placeholders, each after a single space ("N", "START END"), then two
// or more spaces (the description column) or the end of the line.
var headRE = regexp.MustCompile(`^((?:-[-\w.]+,\s+)*-[-\w.]+)((?: \S+)*)(?:\s{2,}|$)`)

// envRE matches the "(env: LLAMA_ARG_CTX_SIZE)" an option's description
// ends with, on a continuation line of its own.
var envRE = regexp.MustCompile(`\(env: ([A-Z][A-Z0-9_]*)\)`)

// Parse reads the options of `llama-server --help`. Only lines that start
// with '-' in the first column are options; continuation lines (the
// description, "(env: ...)") are indented, and an "(env: NAME)" among
// them is the option's variable. A description that begins "the argument
// has been removed" is kept whole, up to the variable, as Removed.
func Parse(help string) []Flag {
	var out []Flag
	for _, line := range strings.Split(help, "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.HasPrefix(line, " ") && len(out) > 0 && out[len(out)-1].Env == "" {
			last := &out[len(out)-1]
			if m := envRE.FindStringSubmatch(line); m != nil {
				last.Env = m[1]
			} else if d := strings.TrimSpace(line); last.Removed != "" && d != "" {
				last.Removed += " " + d
			}
			continue
		}
		if !strings.HasPrefix(line, "-") || strings.HasPrefix(line, "-----") {
			continue
		}
		m := headRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		hint := strings.TrimSpace(m[2])
		f := Flag{Hint: hint, Values: countValues(hint)}
		if d := strings.TrimSpace(line[len(m[0]):]); strings.HasPrefix(d, removedStub) {
			f.Removed = d
		}
		for _, n := range strings.Split(m[1], ",") {
			f.Names = append(f.Names, strings.TrimSpace(n))
		}
		out = append(out, f)
	}
	return out
}

// Merge joins flag lists (the newest tree first) into one entry per name.
// A name that takes a different number of values in two trees is an error:
// the pre-pass could not know how many tokens to pass on.
func Merge(lists ...[]Flag) (map[string]Flag, error) {
	out := map[string]Flag{}
	for _, l := range lists {
		for _, f := range l {
			for _, n := range f.Names {
				old, ok := out[n]
				if !ok {
					out[n] = f
					continue
				}
				if old.Values != f.Values {
					return nil, fmt.Errorf("flag %s takes %d values (%q) in one --help and %d (%q) in another", n, old.Values, old.Hint, f.Values, f.Hint)
				}
			}
		}
	}
	return out, nil
}

// Envs maps each variable the lists (the newest tree first) name to the
// first name of its flag in the newest list that names it: llama-server
// renames a variable with its flag (LLAMA_ARG_MODEL_DRAFT became
// LLAMA_ARG_SPEC_DRAFT_MODEL), so both names stay. A variable of two
// flags that share no name is an error: which one it sets is not known.
func Envs(lists ...[]Flag) (map[string]string, error) {
	out := map[string]string{}
	names := map[string][]string{} // variable -> the names of its flag where first met
	for _, l := range lists {
		for _, f := range l {
			if f.Env == "" {
				continue
			}
			old, ok := names[f.Env]
			if !ok {
				out[f.Env], names[f.Env] = f.Names[0], f.Names
				continue
			}
			if !slices.ContainsFunc(f.Names, func(n string) bool { return slices.Contains(old, n) }) {
				return nil, fmt.Errorf("variable %s is the flag %s in one --help and %s in another", f.Env, old[0], f.Names[0])
			}
		}
	}
	return out, nil
}

// Removed returns the words of the newest captured tree's --help (the
// 2026 tree's) for a flag it lists as a removed stub, which it refuses to
// start on ("the argument has been removed. use ..."), and whether it
// does: the replacement is the help's to name.
func Removed(name string) (why string, ok bool) {
	why, ok = removed[name]
	return why, ok
}

// Variables returns every variable llama-server reads a flag from, as the
// captured --help trees name them (envFlags), sorted. config reads it
// once, at start.
func Variables() []string { return slices.Sorted(maps.Keys(envFlags)) }

// EnvFlag returns every spelling of the flag that llama-server also reads
// from variable name ("LLAMA_ARG_CTX_SIZE" -> -c, --ctx-size), nil for a
// variable it reads for no flag: its command line wins over the variable.
func EnvFlag(name string) []string {
	f, ok := envFlags[name]
	if !ok {
		return nil
	}
	return Spellings(f)
}

// Values reports how many tokens follow a llama-server flag, and whether
// llama-server knows the flag at all.
func Values(name string) (int, bool) {
	n, ok := values[name]
	return n, ok
}

// Names returns the keys of m, sorted.
func Names(m map[string]Flag) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// All returns every llama-server flag name, sorted: one slice, built
// once and shared, so callers must not change it (clone it first). Every
// engine command's checks read it; sorting it each time cost more than
// the rest of a build.
func All() []string { return all() }

var all = sync.OnceValue(func() []string {
	out := make([]string, 0, len(values))
	for n := range values {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
})

// Tree is one of the captured llama.cpp trees, numbered as the
// go:generate line names their --help captures, newest first.
type Tree uint8

const (
	Tree2026   Tree = iota // new-help.txt: --spec-draft-n-max, --spec-type
	TreeLegacy             // old-help.txt: --draft-max, --model-draft
)

// ListedBy reports whether tree's --help lists name: Values knows every
// flag some tree lists, a pass-through flag of another tree among them
// (--spec-draft-n-min, only a 2026 tree's), which this tree refuses at
// start.
func ListedBy(name string, tree Tree) bool {
	if _, ok := values[name]; !ok {
		return false
	}
	bits, some := onlyIn[name]
	return !some || bits&(1<<tree) != 0
}

// AllOf returns every flag name tree's --help lists, sorted; shared as
// All's is (clone it before changing it).
func AllOf(tree Tree) []string { return allOf()[tree] }

var allOf = sync.OnceValue(func() map[Tree][]string {
	out := map[Tree][]string{}
	for _, t := range []Tree{Tree2026, TreeLegacy} {
		for _, n := range All() {
			if ListedBy(n, t) {
				out[t] = append(out[t], n)
			}
		}
	}
	return out
})

// Spellings returns every name of the flag that name is one of, as
// llama-server's --help lists them ("-ngl" -> -ngl, --gpu-layers,
// --n-gpu-layers); a flag with one name gives just that name, an unknown
// one nil.
func Spellings(name string) []string {
	if _, ok := values[name]; !ok {
		return nil
	}
	for _, names := range spellings {
		if slices.Contains(names, name) {
			return names
		}
	}
	return []string{name}
}
