package attachments

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"

	"adhost/runtime"
	"adhost/runtime/protocol"
)

// BenchmarkInlineImage is the validation and assembly cost of one inline
// PNG at the 262,144-byte item limit: schema, base64 checks and signature
// at validation, then the host-budget pass, digest and presentation.
func BenchmarkInlineImage(b *testing.B) {
	png := bytes.Repeat([]byte{'x'}, MaxInlineItemBytes)
	copy(png, "\x89PNG\r\n\x1a\n")
	raw := json.RawMessage(`[{"type":"image","source":{"id":"p","revision":"r"},"mediaType":"image/png","data":"` + base64.StdEncoding.EncodeToString(png) + `"}]`)
	s := New(Options{})
	b.SetBytes(int64(len(png)))
	for b.Loop() {
		rc, err := s.Parse(&protocol.RunRequest{Attachments: raw})
		if err != nil {
			b.Fatal(err)
		}
		if err := rc.Check([]string{TypePNG}); err != nil {
			b.Fatal(err)
		}
		if _, err := rc.Assemble(b.Context(), runtime.ContextExec{}); err != nil {
			b.Fatal(err)
		}
	}
}
