package config

import (
	"strings"
)

// HelpFor is what --help adds to the flag named flag: the variables that
// also set it, its profile key where no variable does, its default, and the
// variables of the flagless rows it stands for (HelpOn). False when no row
// has that flag.
func HelpFor(flag string) (string, bool) {
	var parts, tuning []string
	found := false
	for _, r := range Rows {
		switch {
		case r.Flag == flag && r.Flag != "":
			found = true
			parts = append(parts, r.helpParts()...)
		case r.HelpOn == flag && r.HelpOn != "" && !r.Retired: // a retired row tunes nothing
			tuning = append(tuning, dollars(r.Envs)...)
		}
	}
	if !found {
		return "", false
	}
	if len(tuning) > 0 {
		parts = append(parts, "tuned by "+strings.Join(tuning, ", "))
	}
	return "(" + strings.Join(parts, "; ") + ")", true
}

func (r Row) helpParts() []string {
	var parts []string
	switch {
	case len(r.Envs) > 0:
		parts = append(parts, "env: "+strings.Join(dollars(r.Envs), ", "))
	case r.Key != "":
		parts = append(parts, "profile "+r.Key)
	}
	if r.Default != "" && r.Default != "none" {
		parts = append(parts, "default "+strings.ReplaceAll(r.Default, "`", ""))
	}
	return parts
}

func dollars(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "$" + n
	}
	return out
}

// DocTable is the Markdown table of a scope's rows that
// docs/environment-variables.md carries between its generated markers.
func DocTable(sc Scope) string {
	var b strings.Builder
	b.WriteString("| variable(s), highest first | flag | profile key | default | notes |\n|---|---|---|---|---|\n")
	for _, r := range Rows {
		if r.Scope != sc {
			continue
		}
		def := r.Default
		if r.literal {
			def = "`" + def + "`"
		}
		flag := ""
		if r.Flag != "" {
			flag = "--" + r.Flag
		}
		cells := []string{code(r.Envs...), code(flag), code(r.Key), or(def), r.Doc}
		b.WriteString("| " + strings.Join(cells, " | ") + " |\n")
	}
	return b.String()
}

// code is names as Markdown code, "—" for none.
func code(names ...string) string {
	var out []string
	for _, n := range names {
		if n != "" {
			out = append(out, "`"+n+"`")
		}
	}
	return or(strings.Join(out, ", "))
}

func or(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
