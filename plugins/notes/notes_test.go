package main

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"adhost/abi"
	"adhost/internal/plugintest"
	"adhost/runtime/schema"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/sdktest"
)

// memStore is the tool's store in memory, with the host's bounds.
type memStore struct {
	m    map[string]string
	fail error
}

func (s *memStore) Get(k string) ([]byte, bool, error) {
	v, ok := s.m[k]
	return []byte(v), ok, s.fail
}

func (s *memStore) Put(k string, v []byte) error {
	if s.fail != nil {
		return s.fail
	}
	if _, ok := s.m[k]; !ok && len(s.m) >= abi.MaxKVKeys {
		return &sdk.HTTPError{Errno: abi.ErrLimit}
	}
	s.m[k] = string(v)
	return nil
}

func (s *memStore) Delete(k string) (bool, error) {
	_, ok := s.m[k]
	delete(s.m, k)
	return ok, s.fail
}

func (s *memStore) List() ([]string, error) {
	var keys []string
	for k := range s.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, s.fail
}

func TestRun(t *testing.T) {
	s := &memStore{m: map[string]string{}}
	for _, tc := range []struct{ args, want string }{
		{`{"op":"list"}`, `{"keys":[]}`},
		{`{"op":"get","key":"a"}`, `{"found":false}`},
		{`{"op":"put","key":"a","value":"one"}`, `{"ok":true}`},
		{`{"op":"put","key":"b","value":""}`, `{"ok":true}`},
		{`{"op":"get","key":"a"}`, `{"found":true,"value":"one"}`},
		{`{"op":"put","key":"a","value":"two"}`, `{"ok":true}`},
		{`{"op":"get","key":"a"}`, `{"found":true,"value":"two"}`},
		{`{"op":"list"}`, `{"keys":["a","b"]}`},
		{`{"op":"delete","key":"a"}`, `{"deleted":true}`},
		{`{"op":"delete","key":"a"}`, `{"deleted":false}`},
		{`{"op":"get"}`, `{"error":"get needs a non-empty key"}`},
		{`{"op":"put","key":"x"}`, `{"error":"put needs a value"}`},
		{`{"op":"put","key":"` + strings.Repeat("k", 129) + `","value":"v"}`, `{"error":"a key is at most 128 bytes of UTF-8"}`},
		{`{"op":"put","key":"k","value":"` + strings.Repeat("v", 4097) + `"}`, `{"error":"a note is at most 4096 bytes"}`},
		{`{"op":"rename"}`, `{"error":"op must be put, get, delete or list"}`},
	} {
		out, err := run(s, json.RawMessage(tc.args))
		if err != nil || string(out) != tc.want {
			t.Errorf("%.60s: %s %v, want %s", tc.args, out, err, tc.want)
		}
	}
	// The edges pass.
	if out, _ := run(s, json.RawMessage(`{"op":"put","key":"`+strings.Repeat("k", 128)+`","value":"`+strings.Repeat("v", 4096)+`"}`)); string(out) != `{"ok":true}` {
		t.Errorf("key and value at their bounds: %s", out)
	}
	for i := len(s.m); i < abi.MaxKVKeys; i++ {
		run(s, json.RawMessage(`{"op":"put","key":"n`+string(rune('A'+i%26))+strings.Repeat("x", i)+`","value":"v"}`))
	}
	if out, _ := run(s, json.RawMessage(`{"op":"put","key":"one-more","value":"v"}`)); !strings.HasPrefix(string(out), `{"error":"the notebook is full`) {
		t.Errorf("past the key bound: %s", out)
	}
	s.fail = errors.New("disk on fire")
	if _, err := run(s, json.RawMessage(`{"op":"list"}`)); err == nil {
		t.Error("a failing store is no error")
	}
}

func TestManifest(t *testing.T) {
	m := plugintest.CheckToolManifest(t, ID, tools{})
	if m.Network != nil || !m.KV || !m.Tool(ToolName).HasSideEffects() {
		t.Fatalf("manifest: %+v", m)
	}
	defs := m.ToolDefs()
	in, err := schema.Compile(defs[0].InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	for args, ok := range map[string]bool{
		`{"op":"list"}`: true, `{"op":"get","key":"a"}`: true, `{"op":"put","key":"a","value":""}`: true,
		`{"op":"put","key":"a"}`: false, `{"op":"get"}`: false, `{"op":"delete"}`: false, `{"op":"x"}`: false,
		`{"op":"list","extra":1}`: false, `{"op":"get","key":""}`: false,
	} {
		if err := in.ValidateJSON([]byte(args)); (err == nil) != ok {
			t.Errorf("input %s: %v", args, err)
		}
	}
	out, err := schema.Compile(defs[0].OutputSchema)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{`{"ok":true}`, `{"found":false}`, `{"found":true,"value":"x"}`, `{"deleted":true}`, `{"keys":[]}`, `{"error":"x"}`} {
		if err := out.ValidateJSON([]byte(o)); err != nil {
			t.Errorf("output %s: %v", o, err)
		}
	}
}

// TestNoKV: on a host that does not serve kv the tool fails rather than
// pretending to have stored anything.
func TestNoKV(t *testing.T) {
	res := sdktest.Invoke(t, tools{}, &abi.ToolInvokeInput{CallID: "c1", Name: ToolName, Arguments: json.RawMessage(`{"op":"list"}`)}, sdktest.Options{})
	if res.Status != abi.StatusError || res.Error.Code != sdk.CodeToolFailed {
		t.Fatalf("%+v", res)
	}
}
