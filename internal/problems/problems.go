// Package problems says every problem of one kind in one error: an
// operator who is told the first, fixes it and is told the next, runs the
// command once per problem.
package problems

import (
	"fmt"
	"strings"
)

// List is several problems, numbered in its message ("3 problems in the
// settings: (1) … (2) …"); errors.As finds each (exit 2, as any one is).
type List struct {
	Where string // "in the settings", "on this host"
	Errs  []error
}

func (l List) Error() string {
	msgs := make([]string, len(l.Errs))
	for i, e := range l.Errs {
		msgs[i] = fmt.Sprintf("(%d) %v", i+1, e)
	}
	return fmt.Sprintf("%d problems %s: %s", len(l.Errs), l.Where, strings.Join(msgs, "; "))
}

func (l List) Unwrap() []error { return l.Errs }

// Join is nil for no problem, the one error for one, and a List for
// several.
func Join(where string, errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return List{Where: where, Errs: errs}
}
