package tomlguard

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Kind names a decoded TOML value's type as the file spells it ("an
// integer", not Go's "int64"), for errors about what a key holds: the
// operator wrote TOML.
func Kind(v any) string {
	switch v.(type) {
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a table"
	case []map[string]any:
		return "an array of tables"
	case []any:
		return "an array"
	}
	return "a date or time"
}

// Text is a decoded TOML scalar as the file wrote it, for an error or a
// flag-like text: a string quoted, a float with its point (4.0 is not 4,
// so it is not read back as a whole number) or, from 1e21 up, with its
// exponent (1e30 was said in 31 digits), a table {…}, an array […].
func Text(v any) string {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case string:
		return strconv.Quote(x)
	case float64:
		format := byte('f')
		if math.Abs(x) >= 1e21 {
			format = 'g'
		}
		f := strconv.FormatFloat(x, format, -1, 64)
		if !strings.ContainsAny(f, ".eEnN") {
			f += ".0"
		}
		return f
	case map[string]any:
		return "{…}"
	case []any, []map[string]any:
		return "[…]"
	}
	return fmt.Sprint(v)
}
