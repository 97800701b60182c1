package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"adhost/abi"
	"adhost/runtime/manifest"
	"adhost/runtime/schema"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/sdktest"
)

func TestList(t *testing.T) {
	defs := sdktest.ListTools(t, tools{})
	if len(defs) != 1 || defs[0].Name != LookupName || defs[0].Description == "" {
		t.Fatalf("tools = %+v", defs)
	}
	// The host compiles the schema and validates arguments with it.
	s, err := schema.Compile(defs[0].InputSchema)
	if err != nil {
		t.Fatalf("schema %s: %v", defs[0].InputSchema, err)
	}
	for args, ok := range map[string]bool{`{"value":7}`: true, `{"value":"7"}`: false, `{}`: false, `{"value":1,"x":2}`: false} {
		if err := s.ValidateJSON([]byte(args)); (err == nil) != ok {
			t.Errorf("validate %s: %v", args, err)
		}
	}
}

func TestInvoke(t *testing.T) {
	for _, tc := range []struct {
		name, args, want string
		code             string
	}{
		{name: LookupName, args: `{"value":7}`, want: `{"receipt":7}`},
		{name: LookupName, args: `{"value":-12}`, want: `{"receipt":-12}`},
		{name: LookupName, args: ` { "value" : 9007199254740993 } `, want: `{"receipt":9007199254740993}`},
		{name: LookupName, args: `{"value":1.5}`, code: sdk.CodeToolFailed},
		{name: LookupName, args: `{"value":"7"}`, code: sdk.CodeToolFailed},
		{name: LookupName, args: `{}`, code: sdk.CodeToolFailed},
		{name: LookupName, args: `{"value":1,"extra":2}`, code: sdk.CodeToolFailed},
		{name: LookupName, args: `[7]`, code: sdk.CodeToolFailed},
		{name: "other", args: `{"value":7}`, code: sdk.CodeToolFailed},
	} {
		res := sdktest.Invoke(t, tools{}, &abi.ToolInvokeInput{CallID: "call_1", Name: tc.name, Arguments: json.RawMessage(tc.args)}, sdktest.Options{})
		if tc.code != "" {
			if res.Status != abi.StatusError || res.Error.Code != tc.code {
				t.Errorf("%s %s: status %d error %+v", tc.name, tc.args, res.Status, res.Error)
			}
			continue
		}
		if res.Status != abi.StatusOK || string(res.Output) != tc.want {
			t.Errorf("%s %s: status %d output %s error %+v", tc.name, tc.args, res.Status, res.Output, res.Error)
		}
	}
}

func TestInfoMatchesManifest(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "manifests", "conformance-tools.toml"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	info := sdktest.Info(t, sdk.Registered())
	if info.ID != m.ID || info.Version != m.Version || info.Kind != m.Kind || m.Network != nil {
		t.Errorf("info %+v, manifest %s %s %s network %v", info, m.ID, m.Version, m.Kind, m.Network)
	}
}
