package config

import (
	"reflect"
	"strconv"
	"strings"

	"github.com/speclaunch/speclaunch/internal/tomlguard"
	"github.com/speclaunch/speclaunch/profiles"
)

// profValue is the profile's value at a dotted key ("server.port") as the
// raw text a flag would give, "" when the profile leaves it out. The key is
// looked up by the toml tags of profiles.Profile, so a row names its key
// once; TestRowKeysAreProfileKeys keeps every row's key one the decoder
// reads.
func profValue(p *profiles.Profile, key string) string {
	if p == nil || key == "" {
		return ""
	}
	v := reflect.ValueOf(p).Elem()
	for _, part := range strings.Split(key, ".") {
		if v = tomlField(v, part); !v.IsValid() {
			return ""
		}
	}
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	anyType := v.Kind() == reflect.Interface // a key of any type: a number, a list or a string
	switch x := v.Interface().(type) {
	case string:
		return x
	case int:
		return strconv.Itoa(x)
	case bool:
		return strconv.FormatBool(x)
	case float64:
		if anyType { // 4.0 where a whole number may go is not 4
			return tomlguard.Text(x)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case int64: // a key of any type (a number or a list)
		return strconv.FormatInt(x, 10)
	case []int:
		parts := make([]string, len(x))
		for i, n := range x {
			parts[i] = strconv.Itoa(n)
		}
		return strings.Join(parts, ",")
	case []any:
		if len(x) == 0 {
			return "[]" // not unset: the row's parse refuses an empty list
		}
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = tomlguard.Text(e) // as written: [1, "4"] or [1, 4.0] is not read as 1,4
		}
		return strings.Join(parts, ",")
	case nil:
		return ""
	}
	if v.Kind() == reflect.Interface {
		return tomlguard.Text(v.Interface()) // another type, as written: the row's parse names it
	}
	return ""
}

// tomlField is the field of struct v whose toml tag is name.
func tomlField(v reflect.Value, name string) reflect.Value {
	if v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	t := v.Type()
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); tag == name {
			return v.Field(i)
		}
	}
	return reflect.Value{}
}
