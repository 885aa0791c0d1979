package schedule

import (
	"strings"
	"testing"
)

// FuzzParse: any text (a flag's or a variable's value is outside data)
// parses or is refused with an error, never a panic; what parses is a
// valid schedule that prints back to text that parses to the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"1:6,2-3:4,4+:1", "4", " 1 : 6 , 2 - 3 : 4 , 4+ : 1 ", "1:+6", "1:06", "99999999999999999999+:4",
		"1:6,2-0:4", "", ",", "1-:4", "+", "1:1,2+:1", strings.Repeat("1:4,", 70) + "2+:4", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(text, "fuzz")
		if err != nil {
			return
		}
		again, err := Parse(s.String(), "fuzz")
		if err != nil || again.String() != s.String() {
			t.Fatalf("Parse(%q) = %s, which parses back to %s, %v", text, s, again, err)
		}
	})
}
