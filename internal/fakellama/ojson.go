package fakellama

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// object is a JSON object that keeps its key order, so that responses
// templated from the captures keep llama-server's field order.
type object struct {
	keys []string
	vals map[string]any
}

func newObject() *object { return &object{vals: map[string]any{}} }

func (o *object) get(k string) any { return o.vals[k] }

func (o *object) obj(k string) *object {
	v, _ := o.vals[k].(*object)
	return v
}

// set replaces a value in place, or appends the key.
func (o *object) set(k string, v any) *object {
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
	return o
}

func (o *object) del(k string) {
	if _, ok := o.vals[k]; !ok {
		return
	}
	delete(o.vals, k)
	for i, kk := range o.keys {
		if kk == k {
			o.keys = append(o.keys[:i:i], o.keys[i+1:]...)
			break
		}
	}
}

func (o *object) has(k string) bool { _, ok := o.vals[k]; return ok }

// clone deep-copies objects and arrays.
func clone(v any) any {
	switch x := v.(type) {
	case *object:
		c := &object{keys: append([]string(nil), x.keys...), vals: make(map[string]any, len(x.vals))}
		for k, vv := range x.vals {
			c.vals[k] = clone(vv)
		}
		return c
	case []any:
		c := make([]any, len(x))
		for i := range x {
			c[i] = clone(x[i])
		}
		return c
	}
	return v
}

func (o *object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := marshal(o.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal writes JSON without HTML escaping (llama-server does not escape
// '<' in "<s>"), and floats in the shortest form.
func marshal(v any) ([]byte, error) {
	switch x := v.(type) {
	case *object:
		return x.MarshalJSON()
	case []any:
		var b bytes.Buffer
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			eb, err := marshal(e)
			if err != nil {
				return nil, err
			}
			b.Write(eb)
		}
		b.WriteByte(']')
		return b.Bytes(), nil
	case float64:
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if x == float64(int64(x)) && !bytes.ContainsAny([]byte(s), "e.") {
			s += ".0" // llama-server prints doubles with a fraction ("0.0")
		}
		return []byte(s), nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// parseJSON decodes JSON keeping object key order; numbers stay json.Number.
func parseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (any, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch d := t.(type) {
	case json.Delim:
		switch d {
		case '{':
			o := newObject()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				o.set(k, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return o, nil
		case '[':
			arr := []any{}
			for dec.More() {
				v, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				arr = append(arr, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return arr, nil
		}
		return nil, fmt.Errorf("unexpected delimiter %v", d)
	}
	return t, nil
}

func mustObject(data []byte) *object {
	v, err := parseJSON(data)
	if err != nil {
		panic(fmt.Sprintf("fakellama: captured JSON does not parse: %v", err))
	}
	o, ok := v.(*object)
	if !ok {
		panic("fakellama: captured JSON is not an object")
	}
	return o
}

func mustArray(data []byte) []any {
	v, err := parseJSON(data)
	if err != nil {
		panic(fmt.Sprintf("fakellama: captured JSON does not parse: %v", err))
	}
	a, ok := v.([]any)
	if !ok {
		panic("fakellama: captured JSON is not an array")
	}
	return a
}

func toJSON(v any) []byte {
	b, err := marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
