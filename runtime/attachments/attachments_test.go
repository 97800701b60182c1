package attachments

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"adhost/runtime"
	"adhost/runtime/protocol"
)

func code(err error) protocol.Code { return protocol.CodeOf(err) }

func TestDecodeBase64(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\nabc")
	good := base64.StdEncoding.EncodeToString(png)
	for _, tc := range []struct {
		data  string
		limit int
		want  protocol.Code // "" ok
	}{
		{good, 11, ""},
		{good, 10, CodeContextTooLarge}, // decoded 11 > 10, length bound 16 still holds
		{good, 8, CodeContextTooLarge},  // length bound ceil(8/3)*4 = 12 < 16
		{good[:len(good)-1], 64, CodeInvalidContext},
		{good[:8] + "\n" + good[8:len(good)-1], 64, CodeInvalidContext},
		{strings.ReplaceAll(good, "+", "-"), 64, ""}, // no '+' in this input: unchanged and fine
		{"_9j_4AAQ", 64, CodeInvalidContext},
		{"AB=C", 64, CodeInvalidContext},
		{"A===", 64, CodeInvalidContext},
		{"AAB=", 64, CodeInvalidContext}, // non-zero padding bits: re-encodes as AAA=
		{"AAA=", 64, ""},
		{"====", 64, CodeInvalidContext},
	} {
		_, err := DecodeBase64(tc.data, tc.limit)
		if got := protocol.Code(""); err != nil {
			got = code(err)
			if got != tc.want {
				t.Errorf("DecodeBase64(%q, %d) = %s, want %q", tc.data, tc.limit, got, tc.want)
			}
		} else if tc.want != "" {
			t.Errorf("DecodeBase64(%q, %d) passed, want %s", tc.data, tc.limit, tc.want)
		}
	}
}

func TestSignedAndSniff(t *testing.T) {
	webp := []byte("RIFF\x10\x00\x00\x00WEBPVP8 ")
	for _, tc := range []struct {
		b    []byte
		want string
	}{
		{[]byte("\x89PNG\r\n\x1a\n"), TypePNG},
		{[]byte{0xFF, 0xD8, 0xFF, 0xE0}, TypeJPEG},
		{webp, TypeWEBP},
		{webp[:11], TypePlain}, // WEBP needs 12 bytes: this is only text
		{[]byte("%PDF-1.4"), TypePDF},
		{[]byte("# notes"), TypePlain},
		{[]byte{0xFF, 0xFE, 0x00}, ""},
	} {
		if got := Sniff(tc.b); got != tc.want {
			t.Errorf("Sniff(%q) = %q, want %q", tc.b, got, tc.want)
		}
	}
	if Signed(TypePNG, []byte{0xFF, 0xD8, 0xFF}) {
		t.Error("a JPEG passed as PNG")
	}
}

func TestDecodeItemsSchema(t *testing.T) {
	src := `"source":{"id":"a","revision":"r"}`
	for _, tc := range []struct {
		raw string
		ok  bool
	}{
		{`[]`, true},
		{`[{"type":"text",` + src + `,"mediaType":"text/markdown","text":"x"}]`, true},
		{`[{"type":"text",` + src + `,"mediaType":"text/html","text":"x"}]`, false},
		{`[{"type":"text",` + src + `,"mediaType":"text/plain","text":""}]`, false},
		{`[{"type":"text",` + src + `,"mediaType":"text/plain"}]`, false},
		{`[{"Type":"text",` + src + `,"mediaType":"text/plain","text":"x"}]`, false},
		{`[{"type":"reference","id":"d","revision":"1","mediaType":"application/pdf"}]`, true},
		{`[{"type":"reference","id":"d","revision":"1","mediaType":"image/gif"}]`, false},
		{`[{"type":"reference","id":"-d","revision":"1","mediaType":"text/plain"}]`, false},
		{`[{"type":"text","source":{"id":"a","revision":"r","uri":"app://x y"},"mediaType":"text/plain","text":"x"}]`, false},
		{`[{"type":"text","source":{"id":"a","revision":"r","uri":"app://x\u3000y"},"mediaType":"text/plain","text":"x"}]`, false},
		{`[{"type":"text","source":{"id":"a","revision":"r","uri":"HTTPS://x"},"mediaType":"text/plain","text":"x"}]`, false},
		{`[{"type":"text","source":{"id":"a","revision":"r","location":{"page":0}},"mediaType":"text/plain","text":"x"}]`, false},
		{`[{"type":"text","source":{"id":"a","revision":"r","location":{"page":2.0,"section":""}},"mediaType":"text/plain","text":"x"}]`, true},
		{`[{"type":"text","source":{"id":"a","revision":"r","location":{"page":2.5}},"mediaType":"text/plain","text":"x"}]`, false},
		{`[{"type":"text","source":{"id":"a","revision":"r","title":"` + strings.Repeat("t", 256) + `"},"mediaType":"text/plain","text":"x"}]`, true},
		{`[{"type":"text","source":{"id":"a","revision":"r","title":"` + strings.Repeat("t", 257) + `"},"mediaType":"text/plain","text":"x"}]`, false},
		{`[{"type":"text","source":{"id":"` + strings.Repeat("i", 128) + `","revision":"r"},"mediaType":"text/plain","text":"x"}]`, true},
		{`[{"type":"text","source":{"id":"` + strings.Repeat("i", 129) + `","revision":"r"},"mediaType":"text/plain","text":"x"}]`, false},
		{`null`, false},
		{`[null]`, false},
	} {
		_, err := DecodeItems(json.RawMessage(tc.raw))
		if (err == nil) != tc.ok || (err != nil && code(err) != protocol.CodeInvalidRequest) {
			t.Errorf("DecodeItems(%.90s) = %v, want ok %v", tc.raw, err, tc.ok)
		}
	}
}

// resolver serves one stored document per id.
type resolver struct {
	docs     map[string]Lease
	released int
}

func (r *resolver) Resolve(_ context.Context, ref Reference, _ runtime.ContextExec) (*Lease, error) {
	l, ok := r.docs[ref.ID]
	if !ok {
		return nil, fail(CodeContextNotFound)
	}
	l.Release = func() { r.released++ }
	return &l, nil
}

func parse(t *testing.T, s *Service, attachments, artifact string, schema bool) runtime.RunContext {
	t.Helper()
	req := &protocol.RunRequest{Attachments: json.RawMessage(attachments)}
	if artifact != "" {
		req.OutputArtifact = json.RawMessage(artifact)
	}
	if schema {
		req.OutputSchema = json.RawMessage(`{}`)
	}
	rc, err := s.Parse(req)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func TestAssembleReferencesAndBudgets(t *testing.T) {
	text := func(id, rev, s string) Lease {
		return Lease{Item: Item{Type: "text", MediaType: TypePlain, Text: s, Source: Source{ID: id, Revision: rev}}}
	}
	past, future := time.Now().Add(-time.Minute), time.Now().Add(time.Hour)
	expired := text("old", "1", "x")
	expired.ExpiresAt = &past
	live := text("live", "1", "y")
	live.ExpiresAt = &future
	r := &resolver{docs: map[string]Lease{
		"doc": text("doc", "2", "stored text"), "moved": text("other", "1", "x"),
		"old": expired, "live": live, "big": text("big", "1", strings.Repeat("b", 11)),
	}}
	s := New(Options{Resolver: r, MaxBytes: 20, MaxTextBytes: 15})
	ref := func(id, rev string) string {
		return `{"type":"reference","id":"` + id + `","revision":"` + rev + `","mediaType":"text/plain"}`
	}
	for _, tc := range []struct {
		items string
		want  protocol.Code
	}{
		{`[` + ref("doc", "2") + `]`, ""},
		{`[` + ref("doc", "1") + `]`, CodeContextChanged},
		{`[` + ref("moved", "1") + `]`, CodeContextChanged},
		{`[` + ref("gone", "1") + `]`, CodeContextNotFound},
		{`[` + ref("old", "1") + `]`, CodeContextExpired},
		{`[` + ref("live", "1") + `]`, ""},
		{`[` + ref("doc", "2") + `,{"type":"text","source":{"id":"i","revision":"r"},"mediaType":"text/plain","text":"1234"}]`, ""}, // 11+4 = 15 text bytes
		{`[` + ref("doc", "2") + `,{"type":"text","source":{"id":"i","revision":"r"},"mediaType":"text/plain","text":"12345"}]`, CodeContextTooLarge},
		{`[` + ref("big", "1") + `,{"type":"image","source":{"id":"p","revision":"r"},"mediaType":"image/png","data":"` + base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n!")) + `"}]`, ""}, // 11+9 = 20
		{`[` + ref("big", "1") + `,{"type":"image","source":{"id":"p","revision":"r"},"mediaType":"image/png","data":"` + base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n!!")) + `"}]`, CodeContextTooLarge},
	} {
		rc := parse(t, s, tc.items, "", false)
		if err := rc.Check([]string{TypePNG}); err != nil {
			t.Fatalf("%s: Check: %v", tc.items, err)
		}
		before := r.released
		set, err := rc.Assemble(t.Context(), runtime.ContextExec{RunID: "run", Subject: "alice"})
		if code(err) != tc.want && !(err == nil && tc.want == "") {
			t.Errorf("%.80s: %v, want %s", tc.items, err, tc.want)
			continue
		}
		if err == nil && set.Release != nil {
			set.Release()
			set.Release()
		}
		if got := r.released - before; got > strings.Count(tc.items, `"reference"`) {
			t.Errorf("%.80s: %d releases", tc.items, got)
		}
	}
	rc := parse(t, s, `[`+ref("live", "1")+`]`, `{"name":"a","mediaType":"text/plain"}`, false)
	rc.Check(nil)
	set, err := rc.Assemble(t.Context(), runtime.ContextExec{})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("y"))
	if !bytes.Contains(set.Sources, []byte(`"origin":"reference","expiresAt":"`)) || !bytes.Contains(set.Sources, []byte(hex.EncodeToString(sum[:]))) {
		t.Errorf("sources %s", set.Sources)
	}
}

func TestCheckOrder(t *testing.T) {
	s := New(Options{})
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n"))
	img := `{"type":"image","source":{"id":"p","revision":"r"},"mediaType":"image/png","data":"` + png + `"}`
	ref := `{"type":"reference","id":"d","revision":"1","mediaType":"text/plain"}`
	for _, tc := range []struct {
		items, artifact string
		media           []string
		want            protocol.Code
	}{
		{`[` + img + `]`, "", []string{TypePNG}, ""},
		{`[` + img + `]`, "", []string{TypeJPEG}, CodeUnsupportedModality},
		{`[` + ref + `,` + img + `]`, "", nil, CodeContextUnavailable}, // item order: the reference comes first
		{`[` + img + `,` + ref + `]`, "", nil, CodeUnsupportedModality},
		{`[` + img + `,` + img + `]`, "", nil, CodeInvalidContext}, // preflight over the whole list first
		{`[]`, `{"name":".","mediaType":"text/plain"}`, nil, CodeInvalidArtifact},
		{`[]`, `{"name":"...","mediaType":"text/plain"}`, nil, ""},
	} {
		err := parse(t, s, tc.items, tc.artifact, false).Check(tc.media)
		if code(err) != tc.want && !(err == nil && tc.want == "") {
			t.Errorf("%.60s %s: %v, want %s", tc.items, tc.artifact, err, tc.want)
		}
	}
}

func TestArtifact(t *testing.T) {
	s := New(Options{})
	rc := parse(t, s, `[]`, `{"name":"r é.md","mediaType":"text/markdown"}`, false)
	text := strings.Repeat("é", MaxArtifactBytes/2)
	raw, err := rc.Artifact(text, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var arts []map[string]any
	if err := json.Unmarshal(raw, &arts); err != nil || len(arts) != 1 {
		t.Fatalf("%s: %v", raw, err)
	}
	sum := sha256.Sum256([]byte(text))
	if a := arts[0]; a["content"] != text || a["sha256"] != hex.EncodeToString(sum[:]) || a["status"] != "draft" || a["name"] != "r é.md" {
		t.Errorf("artifact %v", a)
	}
	if _, err := rc.Artifact(text+"x", nil, nil); code(err) != CodeArtifactTooLarge {
		t.Errorf("one byte over: %v", err)
	}
}

func FuzzDecodeBase64(f *testing.F) {
	f.Add("iVBORw0KGgo=", 16)
	f.Add("AAB=", 8)
	f.Fuzz(func(t *testing.T, data string, limit int) {
		if limit < 1 || limit > 1<<20 {
			return
		}
		b, err := DecodeBase64(data, limit)
		if err != nil {
			return
		}
		if base64.StdEncoding.EncodeToString(b) != data || len(b) > limit || len(b) == 0 {
			t.Fatalf("accepted %q", data)
		}
	})
}

func FuzzDecodeItems(f *testing.F) {
	f.Add(`[{"type":"text","source":{"id":"a","revision":"r","location":{"page":1}},"mediaType":"text/plain","text":"x"}]`)
	f.Add(`[{"type":"reference","id":"d","revision":"1","mediaType":"application/pdf"}]`)
	f.Fuzz(func(t *testing.T, raw string) {
		items, err := DecodeItems(json.RawMessage(raw))
		if err != nil {
			if code(err) != protocol.CodeInvalidRequest {
				t.Fatalf("code %s", code(err))
			}
			return
		}
		if len(items) > MaxItems {
			t.Fatal("too many items")
		}
		Preflight(items)
	})
}

// docs is a DocumentStore with one document readable by alice only.
type docs struct{}

func (docs) Document(_ context.Context, p *runtime.Principal, ref Reference) (*Document, error) {
	if ref.ID != "handbook" || p.Subject != "alice" {
		return nil, ErrNoDocument
	}
	return &Document{Source: Source{ID: "handbook", Revision: "v2"}, MediaType: TypeMarkdown, Text: "# Handbook"}, nil
}

func TestStoreResolver(t *testing.T) {
	s := New(Options{Resolver: StoreResolver{Docs: docs{}}})
	ref := func(rev, media string) string {
		return `[{"type":"reference","id":"handbook","revision":"` + rev + `","mediaType":"` + media + `"}]`
	}
	for _, tc := range []struct {
		items, subject string
		want           protocol.Code
	}{
		{ref("v2", TypeMarkdown), "alice", ""},
		{ref("v2", TypeMarkdown), "bob", CodeContextNotFound}, // not readable: the same answer as missing
		{ref("v1", TypeMarkdown), "alice", CodeContextChanged},
		{ref("v2", TypePlain), "alice", CodeContextChanged},
	} {
		rc := parse(t, s, tc.items, "", false)
		if err := rc.Check(nil); err != nil {
			t.Fatal(err)
		}
		set, err := rc.Assemble(t.Context(), runtime.ContextExec{Subject: tc.subject, Principal: &runtime.Principal{Subject: tc.subject}})
		if code(err) != tc.want && !(err == nil && tc.want == "") {
			t.Errorf("%s as %s: %v, want %s", tc.items, tc.subject, err, tc.want)
			continue
		}
		if err == nil && !bytes.Contains(set.Sources, []byte(`"id":"handbook","revision":"v2","mediaType":"text/markdown","bytes":10`)) {
			t.Errorf("sources %s", set.Sources)
		}
	}
	if got := New(Options{}).Features(); len(got) != 2 {
		t.Errorf("features without a resolver %v", got)
	}
	if got := s.Features(); len(got) != 3 || got[2] != "context-references" {
		t.Errorf("features with a resolver %v", got)
	}
}
