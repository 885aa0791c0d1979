package tomlguard

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
