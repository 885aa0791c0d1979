package fakellama

import (
	"regexp"
	"strings"
)

// option is one entry of a captured `llama-server --help`: its names, how
// many values it takes, its env variable, and whether the tree keeps it only
// as a "removed" stub that fails.
type option struct {
	names   []string
	nvals   int
	env     string
	removed bool
	desc    []string // description lines, "(env: …)" excluded
	block   []string // the help lines of this option, verbatim
}

func (o *option) has(name string) bool {
	for _, n := range o.names {
		if n == name {
			return true
		}
	}
	return false
}

var (
	nameRE    = regexp.MustCompile(`^--?[A-Za-z0-9]`)
	sepRE     = regexp.MustCompile(`,\s+`)
	envLineRE = regexp.MustCompile(`^\(env: ([A-Z0-9_]+)\)$`)
)

const descCol = 40

// parseHelp turns captured help text into its options, indexed by name.
// The layout is llama.cpp's: names and metavars in the first 39 columns (or
// the whole line when longer), descriptions from column 40, continuation
// lines indented by 40 spaces.
func parseHelp(help string) (map[string]*option, []*option) {
	byName := map[string]*option{}
	var all []*option
	var cur *option
	indent := strings.Repeat(" ", descCol)
	for _, line := range strings.Split(help, "\n") {
		switch {
		case nameRE.MatchString(line):
			header, desc := line, ""
			if len(line) > descCol && line[descCol-1] == ' ' {
				header, desc = line[:descCol-1], line[descCol:]
			}
			header = strings.TrimSpace(header)
			parts := sepRE.Split(header, -1)
			o := &option{block: []string{line}}
			for i, p := range parts {
				if i < len(parts)-1 {
					o.names = append(o.names, strings.TrimSpace(p))
					continue
				}
				name, rest, _ := strings.Cut(p, " ")
				o.names = append(o.names, name)
				rest = strings.TrimSpace(rest)
				switch {
				case rest == "":
				case strings.ContainsAny(rest, "<{["):
					o.nvals = 1
				default:
					o.nvals = len(strings.Fields(rest))
				}
			}
			if d := strings.TrimSpace(desc); d != "" {
				o.desc = append(o.desc, d)
			}
			cur = o
			all = append(all, o)
			for _, n := range o.names {
				if _, dup := byName[n]; !dup {
					byName[n] = o
				}
			}
		case cur != nil && strings.HasPrefix(line, indent):
			cur.block = append(cur.block, line)
			d := strings.TrimSpace(line)
			if m := envLineRE.FindStringSubmatch(d); m != nil {
				cur.env = m[1]
			} else if d != "" {
				cur.desc = append(cur.desc, d)
			}
		default:
			cur = nil
		}
	}
	for _, o := range all {
		o.removed = len(o.desc) > 0 && strings.HasPrefix(o.desc[0], "the argument has been removed")
	}
	return byName, all
}

// description joins the description lines as llama.cpp's error does.
func (o *option) description() string {
	return strings.Join(o.desc, " ")
}

// removedArgError is NEW llama-server's error for a removed flag.
func removedArgError(arg string, o *option) string {
	var b strings.Builder
	b.WriteString("error while handling argument \"" + arg + "\": " + o.description() + "\n\nusage:\n")
	for _, l := range o.block {
		b.WriteString(l + "\n")
	}
	b.WriteString("\n\nto show complete usage, run with -h\n")
	return b.String()
}

// removedEnvError is NEW llama-server's error for a removed flag's env var.
func removedEnvError(env string, o *option) string {
	return "error while handling environment variable \"" + env + "\": " + o.description() + "\n\n\n"
}
