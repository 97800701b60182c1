package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// decodeAny reads d's next value into what encoding/json decodes into an
// any, descending into containers with Enter and More (strings keep their
// Key and String decoding, numbers become float64).
func decodeAny(d *Decoder, descend bool) (any, error) {
	switch d.Peek() {
	case Object:
		if !descend {
			break
		}
		m := map[string]any{}
		d.Enter()
		for d.More() {
			k := string(d.Key())
			if u := d.UnsafeKey(); u != k {
				return nil, errors.New("UnsafeKey " + u + " != Key " + k)
			}
			v, err := decodeAny(d, !descend || len(k)%2 == 0)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, d.Err()
	case Array:
		if !descend {
			break
		}
		a := []any{}
		d.Enter()
		for d.More() {
			v, err := decodeAny(d, len(a)%2 == 0)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		return a, d.Err()
	}
	v := d.Value()
	if err := d.Err(); err != nil {
		return nil, err
	}
	out, err := unmarshalNumber(v.Raw())
	if err != nil {
		return nil, err
	}
	if v.Kind() == String {
		s, err := v.String()
		if err != nil || s != out {
			return nil, errors.New("String " + s + " differs")
		}
	}
	return out, nil
}

// unmarshalNumber is json.Unmarshal into an any, numbers kept as
// json.Number (so that only syntax decides).
func unmarshalNumber(data []byte) (any, error) {
	if !json.Valid(data) {
		return nil, errors.New("invalid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// checkDecoder compares a Decoder's reading of data with encoding/json's,
// descending into some containers and reading others whole with Value.
func checkDecoder(t *testing.T, data []byte) {
	t.Helper()
	var d Decoder
	d.Reset(data)
	got, err := decodeAny(&d, true)
	if err == nil {
		err = d.Finish()
	}
	want, werr := unmarshalNumber(data)
	if (err == nil) != (werr == nil) {
		t.Fatalf("%q: Decoder err %v, encoding/json %v", data, err, werr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: Decoder read %#v, encoding/json %#v", data, got, want)
	}
	if err != nil && werr != nil {
		var se *SyntaxError
		if !errors.As(err, &se) && !json.Valid(data) {
			t.Fatalf("%q: err %v, want *SyntaxError", data, err)
		}
	}
}

func TestDecoder(t *testing.T) {
	for _, doc := range []string{
		openAIChunk, `{}`, `[]`, ` { } `, `[ [ ] , { } ]`, `null`, `"s"`, `1`,
		`{"a":1,"a":{"b":[1,2,{"c":"d"}]}}`, `{"k\u00e9y":"v","\"q\"":1,"é":"\ud800"}`,
		"{\"a\" : [ 1 , 2 ] ,\n \"b\" : { \"c\" : null } }",
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"step":1}`,
	} {
		checkDecoder(t, []byte(doc))
	}
	for _, doc := range []string{
		``, ` `, `{`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `[1,]`, `[1 2]`, `[,1]`, `{,"a":1}`,
		`{"a":[}`, `{"a":{]}`, `"abc`, `"a\x"`, `"\u12"`, "\"a\x01\"", `01`, `-`, `1.`, `tru`,
		`{"a":1}x`, `{"a":1} {}`, `[` + strings.Repeat("[", 20) + `]`, `{"a":1]`, `[1}`,
	} {
		checkDecoder(t, []byte(doc))
	}
}

func TestDecoderDepth(t *testing.T) {
	for _, n := range []int{maxDepth, maxDepth + 1} {
		doc := []byte(strings.Repeat(`[`, n) + strings.Repeat(`]`, n))
		var d Decoder
		d.Reset(doc)
		for d.Enter() {
		}
		for d.More() || d.Err() == nil && d.st.n > 0 {
		}
		if got, want := d.Finish() == nil, json.Valid(doc); got != want {
			t.Errorf("depth %d: Decoder ok = %v, json.Valid = %v", n, got, want)
		}
	}
}

func TestDecoderNoAllocs(t *testing.T) {
	data := []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"step":1}`)
	allocs := testing.AllocsPerRun(100, func() {
		var d Decoder
		d.Reset(data)
		d.Enter()
		for d.More() {
			if string(d.Key()) == "messages" && d.Enter() {
				for d.More() {
					d.Skip()
				}
				continue
			}
			_ = d.Value()
		}
		if err := d.Finish(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("allocs = %v, want 0", allocs)
	}
}

func FuzzDecoder(f *testing.F) {
	for _, s := range []string{
		openAIChunk, `{"a":1,"a":{"b":2}}`, `[1,-0.5e10,true,false,null,"\u00e9",{"a":[]},{}]`,
		`{"k\u00e9y":"\ud800\u0041"}`, "\"\xff\"", `{"a":1}x`, `[[[[]]]]`, `{"a":[1,]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoder(t, data)
	})
}
