package attachments

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/attachments/attachmentstest"
	"adhost/runtime/protocol"
)

type toolSet struct{}

func (toolSet) Tools(context.Context) ([]abi.ToolDef, error) { return nil, nil }
func (toolSet) Invoke(context.Context, abi.ToolCall, func()) (json.RawMessage, error) {
	return json.RawMessage(`{"ok":true}`), nil
}

// TestEngineRunWithContext drives a real engine: the directive joins the
// instructions, the data block the user turn, and the file parts are sent
// again on the second step, after the tool round.
func TestEngineRunWithContext(t *testing.T) {
	prov := &attachmentstest.ToolThenAnswer{Answer: "done [source:shot]"}
	e, err := runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{{ID: "p", Vendor: "test", AuthMode: "none", AccountID: "a",
			Capabilities: map[string]bool{"tools": true}, InputMediaTypes: map[string][]string{"m": {TypePNG}}, Provider: prov}},
		Tools:   []*runtime.Tool{{Def: abi.ToolDef{Name: "t", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)}, Set: toolSet{}}},
		Context: New(Options{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n0123"))
	instr := "Be brief."
	req := &protocol.RunRequest{Provider: "p", Model: "m", Input: "look", Instructions: &instr, Tools: []string{"t"},
		Attachments:    json.RawMessage(`[{"type":"text","source":{"id":"note","revision":"1"},"mediaType":"text/plain","text":"hello"},{"type":"image","source":{"id":"shot","revision":"2","title":"Screen"},"mediaType":"image/png","data":"` + png + `"}]`),
		OutputArtifact: json.RawMessage(`{"name":"a.md","mediaType":"text/markdown"}`)}
	p := &runtime.Principal{Subject: "alice", Providers: map[string]bool{"p": true}, Tools: map[string]bool{"t": true}}
	run, err := e.Start(t.Context(), p, req, runtime.ModeJSON)
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(prov.Inputs()) != 2 {
		t.Fatalf("%d steps", len(prov.Inputs()))
	}
	for i, in := range prov.Inputs() {
		if !strings.HasPrefix(in.Instructions, "Be brief.\n\n") || !strings.Contains(in.Instructions, "untrusted reference data") {
			t.Errorf("step %d instructions %q", i+1, in.Instructions)
		}
		u := in.Messages[0]
		if !strings.HasPrefix(u.Content, "look\n\nAttached context (data):\n[") || !strings.Contains(u.Content, `"text":"hello"`) || !strings.Contains(u.Content, `"attachment":"image"`) {
			t.Errorf("step %d user turn %q", i+1, u.Content)
		}
		if len(u.Parts) != 2 || u.Parts[0].Text != label+`{"id":"shot","revision":"2","title":"Screen"}` || u.Parts[1].Data != png || u.Parts[1].MediaType != TypePNG {
			t.Errorf("step %d parts %+v", i+1, u.Parts)
		}
	}
	var arts []Artifact
	if err := json.Unmarshal(res.Artifacts, &arts); err != nil || len(arts) != 1 || arts[0].Name != "a.md" {
		t.Fatalf("artifacts %s: %v", res.Artifacts, err)
	}
	if !strings.Contains(string(res.Artifacts), `"content":"done [source:shot]"`) || !strings.Contains(string(res.Artifacts), `"sourceIds":["note","shot"]`) {
		t.Errorf("artifacts %s", res.Artifacts)
	}
}
