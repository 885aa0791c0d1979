// Package typo says which known name a mistyped one meant: one distance
// rule for flags, environment variables, profile keys and secret names.
package typo

import (
	"strings"
	"unicode"
)

// maxEdits is the most edits a typo is taken to be.
const maxEdits = 2

// Nearest returns the candidate closest to name when it is close enough to
// be a typo of it (at most 2 edits: --ngl for -ngl, --dryrun for
// --dry-run, engine.nme for engine.name, and not both in one short word:
// apart), "" otherwise. Ties go to the earliest candidate. A candidate
// whose length differs from name's by the best distance so far or more is
// passed over unmeasured (the distance is at least that difference), so
// that a long list costs little per name.
func Nearest(name string, candidates []string) string {
	best, bestD := "", maxEdits+1
	for _, c := range candidates {
		if diff := len(name) - len(c); diff >= bestD || -diff >= bestD {
			continue
		}
		if d := Distance(name, c); d < bestD && (d < maxEdits || !apart(name, c)) {
			best, bestD = c, d
		}
	}
	return best
}

// apart says whether name and c, two edits from one another, differ in
// a word of under 6 characters by both: two edits turn any short word into
// another (as NearestName says of short names), so --no-proxy is no typo
// of --no-probe but a flag of its own. Words are the runs of letters and
// digits; names of a different number of words (--dryrun, --dry-run) are
// measured whole.
func apart(name, c string) bool {
	a, b := words(name), words(c)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if min(len(a[i]), len(b[i])) < 6 && Distance(a[i], b[i]) >= maxEdits {
			return true
		}
	}
	return false
}

// words splits a name at every character that is no letter or digit.
func words(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// NearestName is Nearest for short names an operator chose or types
// (engine names, profile names), where two edits turn any short name into
// another (tgi, sgl): a candidate under 6 characters is within one edit
// only, and a name under 3 characters is matched to none. Failing that, a
// name of 3 or more characters that begins the shortest candidate it
// begins is that one (dem: demo).
func NearestName(name string, candidates []string) string {
	if len(name) < 3 {
		return ""
	}
	if near := Nearest(name, candidates); near != "" && (len(near) >= 6 || Distance(name, near) <= 1) {
		return near
	}
	best := ""
	for _, c := range candidates {
		if strings.HasPrefix(c, name) && (best == "" || len(c) < len(best)) {
			best = c
		}
	}
	return best
}

// NearestFold is Nearest with case ignored: a name that differs from a
// candidate only in case (--API-KEY for --api-key, --Api-Kye) is a typo of
// it, as a letter left out is. It returns the candidate as spelt.
func NearestFold(name string, candidates []string) string {
	lower := make([]string, len(candidates))
	for i, c := range candidates {
		lower[i] = strings.ToLower(c)
	}
	near := Nearest(strings.ToLower(name), lower)
	for i, c := range lower {
		if near != "" && c == near {
			return candidates[i]
		}
	}
	return ""
}

// Distance is the optimal string alignment distance: insertions,
// deletions, substitutions and swaps of neighbours each cost 1 (a swap is
// the commonest typo: KYE for KEY). It keeps three rows of the table, not
// the whole of it.
func Distance(a, b string) int {
	n := len(b) + 1
	rows := make([]int, 3*n)
	prev2, prev, cur := rows[:n], rows[n:2*n], rows[2*n:]
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
