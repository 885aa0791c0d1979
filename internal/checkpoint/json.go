package checkpoint

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/speclaunch/speclaunch/internal/jsonstr"
)

// A small JSON reader that accepts exactly what upstream mlxcel's
// serde_json (with preserve_order) accepts and keeps what encoding/json
// loses: object key order (config_groups is searched in file order), the
// lexical kind of each number (serde refuses 16.0 or -1 for a usize), and
// duplicate keys (serde's derived structs refuse a repeated field, while a
// serde_json::Value keeps the last). Rejecting like serde matters because
// every peek upstream turns a parse failure into "no answer".

type jkind uint8

const (
	jnull jkind = iota
	jbool
	jnum
	jstr
	jarr
	jobj
)

// number kinds, as serde_json's parser classifies a literal
const (
	numU64 = iota // non-negative integer that fits u64
	numI64        // negative integer that fits i64
	numF64        // anything else: fraction, exponent, "-0", out of integer range
)

type jval struct {
	kind jkind
	b    bool
	s    string // string value
	nk   int    // number kind
	u    uint64
	i    int64
	f    float64
	lex  string // a number as written
	arr  []*jval
	keys []string         // first-occurrence order
	obj  map[string]*jval // last value wins (serde_json::Value)
	dups map[string]bool  // keys that appeared more than once
}

// serde_json refuses nesting deeper than this (its recursion limit, 128).
const maxDepth = 127

func parseJSON(data []byte) (*jval, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("not valid UTF-8")
	}
	p := &jparser{d: data}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i != len(p.d) {
		return nil, fmt.Errorf("trailing characters at byte %d", p.i)
	}
	return v, nil
}

type jparser struct {
	d []byte
	i int
}

func (p *jparser) ws() {
	for p.i < len(p.d) {
		switch p.d[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jparser) errf(format string, a ...any) error {
	return fmt.Errorf("byte %d: %s", p.i, fmt.Sprintf(format, a...))
}

func (p *jparser) lit(s string) bool {
	if len(p.d)-p.i >= len(s) && string(p.d[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

func (p *jparser) value(depth int) (*jval, error) {
	if p.i >= len(p.d) {
		return nil, p.errf("unexpected end of input")
	}
	switch c := p.d[p.i]; {
	case c == '{':
		if depth >= maxDepth {
			return nil, p.errf("recursion limit exceeded")
		}
		return p.object(depth + 1)
	case c == '[':
		if depth >= maxDepth {
			return nil, p.errf("recursion limit exceeded")
		}
		return p.array(depth + 1)
	case c == '"':
		s, err := p.str()
		return &jval{kind: jstr, s: s}, err
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case p.lit("true"):
		return &jval{kind: jbool, b: true}, nil
	case p.lit("false"):
		return &jval{kind: jbool}, nil
	case p.lit("null"):
		return &jval{kind: jnull}, nil
	}
	return nil, p.errf("expected a value")
}

func (p *jparser) object(depth int) (*jval, error) {
	p.i++ // {
	v := &jval{kind: jobj, obj: map[string]*jval{}}
	p.ws()
	if p.i < len(p.d) && p.d[p.i] == '}' {
		p.i++
		return v, nil
	}
	for {
		p.ws()
		if p.i >= len(p.d) || p.d[p.i] != '"' {
			return nil, p.errf("expected a key")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		p.ws()
		if p.i >= len(p.d) || p.d[p.i] != ':' {
			return nil, p.errf("expected ':'")
		}
		p.i++
		p.ws()
		e, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		if _, ok := v.obj[k]; ok {
			if v.dups == nil {
				v.dups = map[string]bool{}
			}
			v.dups[k] = true
		} else {
			v.keys = append(v.keys, k)
		}
		v.obj[k] = e
		p.ws()
		if p.i >= len(p.d) {
			return nil, p.errf("unterminated object")
		}
		switch p.d[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return v, nil
		default:
			return nil, p.errf("expected ',' or '}'")
		}
	}
}

func (p *jparser) array(depth int) (*jval, error) {
	p.i++ // [
	v := &jval{kind: jarr}
	p.ws()
	if p.i < len(p.d) && p.d[p.i] == ']' {
		p.i++
		return v, nil
	}
	for {
		p.ws()
		e, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		v.arr = append(v.arr, e)
		p.ws()
		if p.i >= len(p.d) {
			return nil, p.errf("unterminated array")
		}
		switch p.d[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return v, nil
		default:
			return nil, p.errf("expected ',' or ']'")
		}
	}
}

func (p *jparser) str() (string, error) {
	p.i++ // "
	out, n, err := jsonstr.Append(nil, p.d[p.i:])
	p.i += n
	var se *jsonstr.SyntaxError
	if errors.As(err, &se) {
		return "", p.errf("%s", se.Msg)
	}
	return string(out), nil
}

func (p *jparser) number() (*jval, error) {
	start := p.i
	neg := p.d[p.i] == '-'
	if neg {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.d) && p.d[p.i] >= '0' && p.d[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	intStart := p.i
	if p.i < len(p.d) && p.d[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, p.errf("invalid number")
	}
	intEnd := p.i
	isFloat := false
	if p.i < len(p.d) && p.d[p.i] == '.' {
		p.i++
		isFloat = true
		if digits() == 0 {
			return nil, p.errf("invalid number")
		}
	}
	if p.i < len(p.d) && (p.d[p.i] == 'e' || p.d[p.i] == 'E') {
		p.i++
		isFloat = true
		if p.i < len(p.d) && (p.d[p.i] == '+' || p.d[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.errf("invalid number")
		}
	}
	lex := string(p.d[start:p.i])
	v := &jval{kind: jnum, nk: numF64, lex: lex}
	if !isFloat {
		if u, err := strconv.ParseUint(string(p.d[intStart:intEnd]), 10, 64); err == nil {
			switch {
			case !neg:
				v.nk, v.u = numU64, u
				return v, nil
			case u != 0 && u <= 1<<63:
				v.nk, v.i = numI64, int64(-u)
				return v, nil
			}
		}
	}
	f, err := strconv.ParseFloat(lex, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsInf(f, 0) {
		return nil, p.errf("number out of range")
	}
	v.f = f
	return v, nil
}

// Accessors with serde_json::Value's semantics.

// get is Value::get: the member of an object, nil otherwise.
func (v *jval) get(k string) *jval {
	if v == nil || v.kind != jobj {
		return nil
	}
	return v.obj[k]
}

// asStr is Value::as_str.
func (v *jval) asStr() (string, bool) {
	if v == nil || v.kind != jstr {
		return "", false
	}
	return v.s, true
}

// asU64 is Value::as_u64: only a non-negative integer literal.
func (v *jval) asU64() (uint64, bool) {
	if v == nil || v.kind != jnum {
		return 0, false
	}
	switch v.nk {
	case numU64:
		return v.u, true
	case numI64:
		if v.i >= 0 {
			return uint64(v.i), true
		}
	}
	return 0, false
}

// asI64 is Value::as_i64.
func (v *jval) asI64() (int64, bool) {
	if v == nil || v.kind != jnum {
		return 0, false
	}
	switch v.nk {
	case numU64:
		if v.u <= math.MaxInt64 {
			return int64(v.u), true
		}
	case numI64:
		return v.i, true
	}
	return 0, false
}

// Typed field checks with serde's derive semantics, for the peeks that
// deserialize into a struct: a present field of the wrong type fails the
// whole struct.

// usizeField checks an optional usize field: absent -> (0, false, true);
// wrong type -> ok=false.
func usizeField(m *jval, k string, nullable bool) (n uint64, present, ok bool) {
	v := m.obj[k]
	if v == nil {
		return 0, false, true
	}
	if v.kind == jnull && nullable {
		return 0, false, true
	}
	u, isU := v.asU64()
	return u, isU, isU
}

func strField(m *jval, k string, nullable bool) (s string, present, ok bool) {
	v := m.obj[k]
	if v == nil {
		return "", false, true
	}
	if v.kind == jnull && nullable {
		return "", false, true
	}
	s, isS := v.asStr()
	return s, isS, isS
}

func i32Field(m *jval, k string) (n int64, present, ok bool) {
	v := m.obj[k]
	if v == nil {
		return 0, false, true
	}
	i, isI := v.asI64()
	if !isI || i < math.MinInt32 || i > math.MaxInt32 {
		return 0, false, false
	}
	return i, true, true
}

func numField(m *jval, k string) bool { // f32: any number
	v := m.obj[k]
	return v == nil || v.kind == jnum
}

func boolField(m *jval, k string) bool {
	v := m.obj[k]
	return v == nil || v.kind == jbool
}

func usizeList(v *jval) ([]uint64, bool) {
	return listOf(v, (*jval).asU64)
}

// listOf deserializes a Vec<T>: an array whose every element elem
// accepts; anything else, null and absent included, fails.
func listOf[T any](v *jval, elem func(*jval) (T, bool)) ([]T, bool) {
	if v == nil || v.kind != jarr {
		return nil, false
	}
	out := make([]T, 0, len(v.arr))
	for _, e := range v.arr {
		x, ok := elem(e)
		if !ok {
			return nil, false
		}
		out = append(out, x)
	}
	return out, true
}
