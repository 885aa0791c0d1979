package tomlpos

import (
	"slices"
	"strings"
)

// ElementAt is where byte at of src sits in the array value of the
// assignment written on line (from 1): the index from 1 of the element
// that holds it in each enclosing array, outermost first, so that an error
// the decoder reports by offset alone names its element as a validator
// would ("schedule = [[1, 0, 99999999999999999999]]" at the last number:
// [1, 3], bucket 1 number 3). Comments and strings are skipped. It is nil
// where it cannot say: at outside an array of that assignment, or inside
// an inline table.
func ElementAt(src string, line, at int) []int {
	i := lineStart(src, line)
	if i < 0 || at < i || at >= len(src) {
		return nil
	}
	// The value starts after the assignment's "=", outside any quoted key.
	for i < at && src[i] != '=' {
		if src[i] == '"' || src[i] == '\'' {
			i = skipString(src, i)
			continue
		}
		i++
	}
	var stack []int // one per open array: the element being read; 0 for an inline table
	for i++; i < at; i++ {
		switch src[i] {
		case '#':
			for i < at && src[i] != '\n' {
				i++
			}
		case '"', '\'':
			i = skipString(src, i) - 1
		case '[':
			stack = append(stack, 1)
		case '{':
			stack = append(stack, 0)
		case ']', '}':
			if len(stack) == 0 {
				return nil // the value ended before at
			}
			stack = stack[:len(stack)-1]
		case ',':
			if len(stack) > 0 && stack[len(stack)-1] > 0 {
				stack[len(stack)-1]++
			}
		}
	}
	if len(stack) == 0 || slices.Contains(stack, 0) {
		return nil // outside the array, or inside an inline table, which has keys, not elements
	}
	return stack
}

// lineStart is the offset of line n (from 1) of src, -1 past its end.
func lineStart(src string, n int) int {
	i := 0
	for ; n > 1; n-- {
		j := strings.IndexByte(src[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
	}
	return i
}

// skipString is the offset just past the string that opens at src[i]:
// basic or literal, one line or multi-line; len(src) if it never closes.
func skipString(src string, i int) int {
	q := src[i : i+1]
	if strings.HasPrefix(src[i:], q+q+q) {
		if j := strings.Index(src[i+3:], q+q+q); j >= 0 {
			return i + 3 + j + 3
		}
		return len(src)
	}
	for j := i + 1; j < len(src); j++ {
		switch {
		case src[j] == '\\' && q == `"`:
			j++
		case src[j] == q[0] || src[j] == '\n':
			return j + 1
		}
	}
	return len(src)
}
