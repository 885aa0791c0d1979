package problems

import (
	"errors"
	"io/fs"
	"testing"
)

func TestJoin(t *testing.T) {
	one, two := errors.New("one"), fs.ErrNotExist
	cases := []struct {
		name string
		errs []error
		want string // "" = nil
	}{
		{"none", nil, ""},
		{"one is said as it is", []error{one}, "one"},
		{"several are numbered", []error{one, two}, "2 problems in the settings: (1) one; (2) file does not exist"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Join("in the settings", c.errs)
			if err == nil && c.want != "" || err != nil && err.Error() != c.want {
				t.Fatalf("Join = %v, want %q", err, c.want)
			}
			for _, e := range c.errs {
				if !errors.Is(err, e) {
					t.Errorf("errors.Is(%v, %v) = false", err, e)
				}
			}
		})
	}
}
