package e2e_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// contextSite is a test host whose fixture model accepts PNG, JPEG and PDF
// attachments (not WEBP).
func contextSite(t *testing.T) (*site, *server) {
	t.Helper()
	s := newSite(t)
	editSiteConfig(t, s, "models = [\"fixture-model\"]\n",
		"models = [\"fixture-model\", \"other-model\"]\ninput_media_types = { \"fixture-model\" = [\"image/png\", \"image/jpeg\", \"application/pdf\"] }\n")
	return s, startServer(t, s)
}

// postRun sends a JSON-mode run with the raw body and returns its status
// and decoded answer.
func postRun(t *testing.T, srv *server, token, body string) (int, map[string]any) {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}}
	resp, b := callRaw(t, http.MethodPost, srv.URL+"/v1/runs", h, body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("answer %d %.300s: %v", resp.StatusCode, b, err)
	}
	return resp.StatusCode, out
}

func errCode(ans map[string]any) string {
	e, _ := ans["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func src(id string) string { return fmt.Sprintf(`{"id":%q,"revision":"r1"}`, id) }

func textItem(id, text string) string {
	b, _ := json.Marshal(text)
	return fmt.Sprintf(`{"type":"text","source":%s,"mediaType":"text/plain","text":%s}`, src(id), b)
}

func binItem(typ, media, id, data string) string {
	return fmt.Sprintf(`{"type":%q,"source":%s,"mediaType":%q,"data":%q}`, typ, src(id), media, data)
}

func runBody(input string, items []string, extra string) string {
	b, _ := json.Marshal(input)
	body := `{"provider":"fixture","model":"fixture-model","input":` + string(b)
	if items != nil {
		body += `,"attachments":[` + strings.Join(items, ",") + `]`
	}
	return body + extra + `}`
}

// file is n bytes starting with the signature sig.
func file(sig string, n int) []byte {
	b := bytes.Repeat([]byte{'x'}, n)
	copy(b, sig)
	return b
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

const (
	pngSig  = "\x89PNG\r\n\x1a\n"
	jpegSig = "\xff\xd8\xff"
	pdfSig  = "%PDF-1.7\n"
	webpSig = "RIFF\x00\x00\x00\x00WEBP"
)

func TestContextValidation(t *testing.T) {
	s, srv := contextSite(t)
	const L, total = 262_144, 524_288
	atLimit := b64(file(pngSig, L))
	overLimit := b64(file(pngSig, L+1)) // same base64 length bound, one decoded byte over
	cases := []struct {
		name   string
		body   string
		status int
		code   string
	}{
		{"text at the item limit", runBody("hi", []string{textItem("a", strings.Repeat("é", L/2))}, ""), 200, ""},
		{"text one byte over", runBody("hi", []string{textItem("a", strings.Repeat("é", L/2)+"x")}, ""), 502, "CONTEXT_TOO_LARGE"},
		{"png at the item limit", runBody("hi", []string{binItem("image", "image/png", "p", atLimit)}, ""), 200, ""},
		{"png one decoded byte over", runBody("hi", []string{binItem("image", "image/png", "p", overLimit)}, ""), 502, "CONTEXT_TOO_LARGE"},
		{"pdf at the item limit", runBody("hi", []string{binItem("pdf", "application/pdf", "d", b64(file(pdfSig, L)))}, ""), 200, ""},
		{"pdf one decoded byte over", runBody("hi", []string{binItem("pdf", "application/pdf", "d", b64(file(pdfSig, L+1)))}, ""), 502, "CONTEXT_TOO_LARGE"},
		{"jpeg at the item limit", runBody("hi", []string{binItem("image", "image/jpeg", "j", b64(file(jpegSig, L)))}, ""), 200, ""},
		{"base64 longer than the bound", runBody("hi", []string{binItem("image", "image/png", "p", atLimit+"AAAA")}, ""), 502, "CONTEXT_TOO_LARGE"},
		{"inline total at its limit", runBody("hi", []string{textItem("a", strings.Repeat("y", L)), binItem("pdf", "application/pdf", "b", b64(file(pdfSig, total-L)))}, ""), 200, ""},
		{"inline total one over", runBody("hi", []string{textItem("a", strings.Repeat("y", L)), binItem("pdf", "application/pdf", "b", b64(file(pdfSig, total-L))), textItem("c", "z")}, ""), 502, "CONTEXT_TOO_LARGE"},
		{"a JPEG declared as PNG", runBody("hi", []string{binItem("image", "image/png", "p", b64(file(jpegSig, 64)))}, ""), 502, "INVALID_CONTEXT"},
		{"a PNG declared as PDF", runBody("hi", []string{binItem("pdf", "application/pdf", "p", b64(file(pngSig, 64)))}, ""), 502, "INVALID_CONTEXT"},
		{"base64 with a line break", runBody("hi", []string{binItem("image", "image/png", "p", b64(file(pngSig, 60))[:40]+"\n"+b64(file(pngSig, 60))[40:])}, ""), 502, "INVALID_CONTEXT"},
		{"base64 with non-zero padding bits", runBody("hi", []string{binItem("image", "image/png", "p", strings.TrimSuffix(b64(file(pngSig, 10)), "A==")+"B==")}, ""), 502, "INVALID_CONTEXT"},
		{"url-safe base64", runBody("hi", []string{binItem("image", "image/jpeg", "p", "_9j_4AAQ")}, ""), 502, "INVALID_CONTEXT"},
		{"data URL", runBody("hi", []string{binItem("image", "image/png", "p", "data:image/png;base64,"+b64(file(pngSig, 12)))}, ""), 502, "INVALID_CONTEXT"},
		{"duplicate source ids", runBody("hi", []string{textItem("a", "one"), binItem("image", "image/png", "a", b64(file(pngSig, 12)))}, ""), 502, "INVALID_CONTEXT"},
		{"reversed location", runBody("hi", []string{`{"type":"text","source":{"id":"a","revision":"r","location":{"page":3,"pageEnd":2}},"mediaType":"text/plain","text":"x"}`}, ""), 502, "INVALID_CONTEXT"},
		{"uri with credentials", runBody("hi", []string{`{"type":"text","source":{"id":"a","revision":"r","uri":"https://name:secret@host/x"},"mediaType":"text/plain","text":"x"}`}, ""), 502, "INVALID_CONTEXT"},
		{"webp not enabled", runBody("hi", []string{binItem("image", "image/webp", "w", b64(file(webpSig, 16)))}, ""), 502, "UNSUPPORTED_MODALITY"},
		{"modality before model", `{"provider":"fixture","model":"nope","input":"hi","attachments":[` + binItem("image", "image/png", "p", b64(file(pngSig, 12))) + `]}`, 502, "UNSUPPORTED_MODALITY"},
		{"image on a text-only model", `{"provider":"fixture","model":"other-model","input":"hi","attachments":[` + binItem("image", "image/png", "p", b64(file(pngSig, 12))) + `]}`, 502, "UNSUPPORTED_MODALITY"},
		{"text on a text-only model", `{"provider":"fixture","model":"other-model","input":"hi","attachments":[` + textItem("a", "x") + `]}`, 200, ""},
		{"reference without a resolver", runBody("hi", []string{`{"type":"reference","id":"doc","revision":"r1","mediaType":"text/plain"}`}, ""), 502, "CONTEXT_UNAVAILABLE"},
		{"type and media mismatch", runBody("hi", []string{binItem("image", "application/pdf", "p", b64(file(pdfSig, 12)))}, ""), 400, "INVALID_REQUEST"},
		{"file uri", runBody("hi", []string{`{"type":"text","source":{"id":"a","revision":"r","uri":"file:///etc/passwd"},"mediaType":"text/plain","text":"x"}`}, ""), 400, "INVALID_REQUEST"},
		{"extra property", runBody("hi", []string{`{"type":"text","source":{"id":"a","revision":"r"},"mediaType":"text/plain","text":"x","extra":1}`}, ""), 400, "INVALID_REQUEST"},
		{"null title", runBody("hi", []string{`{"type":"text","source":{"id":"a","revision":"r","title":null},"mediaType":"text/plain","text":"x"}`}, ""), 400, "INVALID_REQUEST"},
		{"17 items", runBody("hi", repeatItems(17), ""), 400, "INVALID_REQUEST"},
		{"16 items", runBody("hi", repeatItems(16), ""), 200, ""},
		{"artifact named ..", runBody("hi", nil, `,"outputArtifact":{"name":"..","mediaType":"text/plain"}`), 502, "INVALID_ARTIFACT"},
		{"JSON artifact without outputSchema", runBody("hi", nil, `,"outputArtifact":{"name":"a.json","mediaType":"application/json"}`), 502, "INVALID_ARTIFACT"},
		{"artifact name with a slash", runBody("hi", nil, `,"outputArtifact":{"name":"a/b","mediaType":"text/plain"}`), 400, "INVALID_REQUEST"},
		{"artifact name of 128 characters", runBody("hi", nil, `,"outputArtifact":{"name":"`+strings.Repeat("n", 128)+`","mediaType":"text/plain"}`), 200, ""},
		{"artifact name of 129 characters", runBody("hi", nil, `,"outputArtifact":{"name":"`+strings.Repeat("n", 129)+`","mediaType":"text/plain"}`), 400, "INVALID_REQUEST"},
	}
	for _, tc := range cases {
		status, ans := postRun(t, srv, s.token, tc.body)
		if status != tc.status || errCode(ans) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, status, errCode(ans), tc.status, tc.code)
		}
	}
}

func repeatItems(n int) []string {
	items := make([]string, n)
	for i := range items {
		items[i] = textItem(fmt.Sprintf("s%d", i), "x")
	}
	return items
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestContextPresentation runs the fixture's echo:sources: the model sees
// the sources in request order, the files as parts, and the result carries
// the manifest and the artifact with digests computed here independently.
func TestContextPresentation(t *testing.T) {
	s, srv := contextSite(t)
	png, pdf := file(pngSig, 100), file(pdfSig, 300)
	md := "# Brief\nBattery lifetime fell 12% after 400 cycles."
	items := []string{
		`{"type":"text","source":{"id":"study-4-p7","revision":"r3","uri":"app://library/study-4","location":{"documentId":"study-4","page":7,"startLine":12,"endLine":14}},"mediaType":"text/markdown","text":` + mustJSON(t, md) + `}`,
		binItem("image", "image/png", "shot", b64(png)),
		textItem("note", "plain é"),
		binItem("pdf", "application/pdf", "contract", b64(pdf)),
	}
	status, ans := postRun(t, srv, s.token, runBody("echo:sources", items, `,"outputArtifact":{"name":"review.md","mediaType":"text/markdown"}`))
	if status != 200 {
		t.Fatalf("status %d %v", status, ans)
	}
	const want = "sources: study-4-p7 shot note contract; files: image/png application/pdf"
	if ans["text"] != want {
		t.Errorf("text %q, want %q", ans["text"], want)
	}
	sources, _ := ans["sources"].([]any)
	wantSrc := []struct {
		id, media string
		content   []byte
	}{{"study-4-p7", "text/markdown", []byte(md)}, {"shot", "image/png", png}, {"note", "text/plain", []byte("plain é")}, {"contract", "application/pdf", pdf}}
	if len(sources) != len(wantSrc) {
		t.Fatalf("sources %v", ans["sources"])
	}
	for i, w := range wantSrc {
		e := sources[i].(map[string]any)
		if e["id"] != w.id || e["mediaType"] != w.media || e["sha256"] != sha(w.content) || e["bytes"] != float64(len(w.content)) || e["origin"] != "inline" {
			t.Errorf("sources[%d] = %v, want %s %s %d bytes sha256 %s", i, e, w.id, w.media, len(w.content), sha(w.content))
		}
	}
	if loc := sources[0].(map[string]any)["location"]; fmt.Sprint(loc) != "map[documentId:study-4 endLine:14 page:7 startLine:12]" {
		t.Errorf("location %v", loc)
	}
	arts, _ := ans["artifacts"].([]any)
	if len(arts) != 1 {
		t.Fatalf("artifacts %v", ans["artifacts"])
	}
	a := arts[0].(map[string]any)
	if a["name"] != "review.md" || a["mediaType"] != "text/markdown" || a["status"] != "draft" || a["content"] != want || a["sha256"] != sha([]byte(want)) {
		t.Errorf("artifact %v", a)
	}
	if fmt.Sprint(a["sourceIds"]) != "[study-4-p7 shot note contract]" {
		t.Errorf("sourceIds %v", a["sourceIds"])
	}
	if id, _ := a["id"].(string); len(id) != 36 || id[14] != '4' {
		t.Errorf("artifact id %q is not a UUID v4", id)
	}

	// Without attachments: no sources, sourceIds [], and a JSON artifact is
	// the compact validated output.
	status, ans = postRun(t, srv, s.token, `{"provider":"fixture","model":"fixture-model","input":"conformance:structured","attachments":[],"outputSchema":{"type":"object"},"outputArtifact":{"name":"out.json","mediaType":"application/json"}}`)
	if status != 200 {
		t.Fatalf("status %d %v", status, ans)
	}
	if _, ok := ans["sources"]; ok {
		t.Errorf("sources present without context: %v", ans["sources"])
	}
	a = ans["artifacts"].([]any)[0].(map[string]any)
	if a["content"] != `{"ok":true}` || a["sha256"] != sha([]byte(`{"ok":true}`)) || fmt.Sprint(a["sourceIds"]) != "[]" {
		t.Errorf("JSON artifact %v", a)
	}

	// Discovery and features.
	h := http.Header{"Authorization": {"Bearer " + s.token}}
	_, b := callRaw(t, http.MethodGet, srv.URL+"/v1/protocol", h, "")
	if !bytes.Contains(b, []byte(`"context-inputs","draft-artifacts"`)) || bytes.Contains(b, []byte("context-references")) {
		t.Errorf("/v1/protocol %s", b)
	}
	_, b = callRaw(t, http.MethodGet, srv.URL+"/v1/providers", h, "")
	var provs struct {
		Providers []struct {
			ID              string              `json:"id"`
			Capabilities    map[string]bool     `json:"capabilities"`
			InputMediaTypes map[string][]string `json:"inputMediaTypes"`
		} `json:"providers"`
	}
	if err := json.Unmarshal(b, &provs); err != nil || len(provs.Providers) != 1 {
		t.Fatalf("/v1/providers %s: %v", b, err)
	}
	p := provs.Providers[0]
	if !p.Capabilities["images"] || !p.Capabilities["documents"] ||
		fmt.Sprint(p.InputMediaTypes) != "map[fixture-model:[image/png image/jpeg application/pdf]]" {
		t.Errorf("fixture entry %s", b)
	}
	// The capability flags describe the instance: requiredCapabilities
	// passes for the text-only model too.
	if status, ans := postRun(t, srv, s.token, `{"provider":"fixture","model":"other-model","input":"hi","requiredCapabilities":["images","documents"]}`); status != 200 {
		t.Errorf("requiredCapabilities images on other-model: %d %v", status, ans)
	}
}

// TestContextMediaRefused: enabling PDF for an adapter that cannot carry
// it is a start-up error naming the key and its line.
func TestContextMediaRefused(t *testing.T) {
	s := newSite(t)
	editSiteConfig(t, s, "models = [\"fixture-model\"]\n",
		"models = [\"fixture-model\"]\ninput_media_types = { \"fixture-model\" = [\"image/gif\"] }\n")
	code, _, stderr := adhost(t, "serve", "--config", s.config, "--listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, "providers[0].input_media_types.fixture-model") || !strings.Contains(stderr, "host.toml:") {
		t.Errorf("exit %d, stderr %s", code, stderr)
	}
}

// TestCLIRunAttach: `adhost run --attach` sniffs each file's media type
// from its content (a PNG named .txt stays a PNG), the Go client validates
// the manifest, and --artifact prints the artifact's digest.
func TestCLIRunAttach(t *testing.T) {
	s, srv := contextSite(t)
	png := filepath.Join(s.dir, "notes.txt")
	if err := os.WriteFile(png, file(pngSig, 40), 0o600); err != nil {
		t.Fatal(err)
	}
	brief := filepath.Join(s.dir, "brief.md")
	if err := os.WriteFile(brief, []byte("# Brief"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"run", "--url", srv.URL, "--token-file", filepath.Join(s.dir, "data", "dev.token"), "--provider", "fixture", "--model", "fixture-model"}
	code, stdout, stderr := adhost(t, append(base, "--attach", brief, "--attach", png, "--artifact", "markdown", "echo:sources")...)
	const want = "sources: brief.md notes.txt; files: image/png"
	if code != 0 || stdout != want+"\n" {
		t.Fatalf("exit %d stdout %q stderr %s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "artifact artifact.md (text/markdown) sha256 "+sha([]byte(want))+", sources [brief.md notes.txt]") {
		t.Errorf("stderr %s", stderr)
	}
	code, _, stderr = adhost(t, append(base, "--artifact", "pdf", "hi")...)
	if code == 0 || !strings.Contains(stderr, "--artifact") {
		t.Errorf("--artifact pdf: exit %d %s", code, stderr)
	}
	// A JSON artifact is the compact validated output; it needs --schema.
	schema := filepath.Join(s.dir, "schema.json")
	if err := os.WriteFile(schema, []byte(`{"type":"object"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = adhost(t, append(base, "--schema", schema, "--artifact", "json", "conformance:structured")...)
	if code != 0 || !strings.Contains(stdout, `{"ok":true}`) ||
		!strings.Contains(stderr, "artifact artifact.json (application/json) sha256 "+sha([]byte(`{"ok":true}`))+", sources []") {
		t.Errorf("--artifact json: exit %d stdout %q stderr %s", code, stdout, stderr)
	}
	code, _, stderr = adhost(t, append(base, "--artifact", "json", "conformance:structured")...)
	if code == 0 || !strings.Contains(stderr, "INVALID_ARTIFACT") && !strings.Contains(stderr, "--schema") {
		t.Errorf("--artifact json without --schema: exit %d %s", code, stderr)
	}
}

// TestContextDurable: an idempotent replay returns the recorded sources and
// artifact (same artifact id) without running again, a changed attachment
// under the same key is IDEMPOTENCY_CONFLICT, and job submission validates
// attachments like a run.
func TestContextDurable(t *testing.T) {
	s := jobSite(t, 1)
	editSiteConfig(t, s, "models = [\"fixture-model\"]\n", "models = [\"fixture-model\"]\ninput_media_types = { \"fixture-model\" = [\"image/png\"] }\n")
	b, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.config, append(b, "\n[idempotency]\nenabled = true\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, s)
	item := binItem("image", "image/png", "shot", b64(file(pngSig, 32)))
	keyed := func(items ...string) string {
		return runBody("echo:sources", items, `,"idempotencyKey":"ctx-1","outputArtifact":{"name":"a.txt","mediaType":"text/plain"}`)
	}
	status, first := postRun(t, srv, s.token, keyed(item))
	if status != 200 {
		t.Fatalf("first: %d %v", status, first)
	}
	status, again := postRun(t, srv, s.token, keyed(item))
	if status != 200 || mustJSON(t, again["artifacts"]) != mustJSON(t, first["artifacts"]) || mustJSON(t, again["sources"]) != mustJSON(t, first["sources"]) || again["runId"] != first["runId"] {
		t.Errorf("replay: %d %v\nfirst %v", status, again, first)
	}
	if status, ans := postRun(t, srv, s.token, keyed(textItem("shot", "changed"))); status != 409 || errCode(ans) != "IDEMPOTENCY_CONFLICT" {
		t.Errorf("changed attachment: %d %v", status, ans)
	}

	h := http.Header{"Authorization": {"Bearer " + s.token}, "Content-Type": {"application/json"}}
	for _, tc := range []struct {
		item   string
		status int
		code   string
	}{
		{binItem("image", "image/webp", "w", b64(file(webpSig, 16))), 502, "UNSUPPORTED_MODALITY"},
		{binItem("image", "image/png", "p", b64(file(jpegSig, 16))), 502, "INVALID_CONTEXT"},
		{item, 200, ""},
	} {
		body := `{"key":"job-` + tc.code + `","request":` + runBody("echo:sources", []string{tc.item}, "") + `}`
		resp, b := callRaw(t, http.MethodPost, srv.URL+"/v1/jobs/submit", h, body)
		var ans map[string]any
		json.Unmarshal(b, &ans)
		if resp.StatusCode != tc.status || errCode(ans) != tc.code {
			t.Errorf("job with %.40s: %d %s", tc.item, resp.StatusCode, b)
		}
	}
}

// TestContextMediaAdapterRefused: PDF enabled for the Chat Completions
// adapter, which cannot carry it, stops `serve` with the key, its line and
// the extension; images for the same model are fine.
func TestContextMediaAdapterRefused(t *testing.T) {
	s := newSite(t)
	oa := copyPlugin(t, s.dir, "openai", "1.0.0")
	base, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("ADHOST_E2E_OPENAI_KEY", "sk-test")
	doc := string(base) + fmt.Sprintf("\n[[extensions]]\nid = \"openai\"\nversion = \"1.0.0\"\nmodule = %q\nsha256 = %q\n", filepath.Base(oa.path), oa.digest) +
		"\n[[providers]]\nid = \"openai-main\"\nextension = \"openai@1.0.0\"\nmodels = [\"gpt-4o\"]\nsecrets = { api_key = { env = \"ADHOST_E2E_OPENAI_KEY\" } }\n" +
		"input_media_types = { \"gpt-4o\" = [\"image/png\", \"application/pdf\"] }\n"
	if err := os.WriteFile(s.config, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	line := strings.Count(doc[:strings.Index(doc, "input_media_types = { \"gpt-4o\"")], "\n") + 1
	code, stdout, stderr := adhost(t, "serve", "--config", s.config, "--listen", "127.0.0.1:0")
	want := fmt.Sprintf("host.toml:%d: providers[1].input_media_types.gpt-4o: \"application/pdf\": extension openai@1.0.0 cannot carry PDF documents", line)
	if code == 0 || strings.Contains(stdout, "listening on") || !strings.Contains(stderr, want) || strings.Contains(stderr, "image/png") {
		t.Errorf("exit %d, stderr %s\nwant %s", code, stderr, want)
	}
}

// TestContextHostBudget: [context] max_bytes is checked when the context is
// assembled, after run.started: a stream shows run.started then run.failed
// CONTEXT_TOO_LARGE, JSON mode answers 502 with the code; exactly at the
// budget the run completes.
func TestContextHostBudget(t *testing.T) {
	s := newSite(t)
	b, err := os.ReadFile(s.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.config, append(b, "\n[context]\nmax_bytes = 100\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, s)
	over := runBody("echo:sources", []string{textItem("a", strings.Repeat("x", 60)), textItem("b", strings.Repeat("y", 41))}, "")
	at := runBody("echo:sources", []string{textItem("a", strings.Repeat("x", 60)), textItem("b", strings.Repeat("y", 40))}, "")
	if status, ans := postRun(t, srv, s.token, at); status != 200 || ans["text"] != "sources: a b; files: " {
		t.Errorf("at the budget: %d %v", status, ans)
	}
	if status, ans := postRun(t, srv, s.token, over); status != 502 || errCode(ans) != "CONTEXT_TOO_LARGE" {
		t.Errorf("one byte over, JSON: %d %v", status, ans)
	}
	h := http.Header{"Authorization": {"Bearer " + s.token}, "Content-Type": {"application/json"}, "Accept": {"text/event-stream"}}
	resp, body := callRaw(t, http.MethodPost, srv.URL+"/v1/runs", h, over)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "event: run.started") ||
		!strings.Contains(string(body), "event: run.failed") || !strings.Contains(string(body), `"CONTEXT_TOO_LARGE"`) || strings.Contains(string(body), "step.started") {
		t.Errorf("one byte over, SSE: %d %s", resp.StatusCode, body)
	}
}

// TestContextTextBudget: [context] max_text_bytes caps the UTF-8 bytes of
// the run's text items together, at assembly (wire-context §3.6): exactly
// at it the run completes, one byte over across two items is
// CONTEXT_TOO_LARGE, and an image beside them does not count against it.
func TestContextTextBudget(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	editSiteConfig(t, s, "models = [\"fixture-model\"]\n",
		"models = [\"fixture-model\"]\ninput_media_types = { \"fixture-model\" = [\"image/png\"] }\n")
	appendSiteConfig(t, s, "[context]\nmax_text_bytes = 10\n")
	srv := startServer(t, s)
	png := binItem("image", "image/png", "shot", b64(file(pngSig, 64)))
	for _, tc := range []struct {
		name   string
		items  []string
		status int
		code   string
	}{
		{"at the budget", []string{textItem("a", "ééé"), textItem("b", "xyzw")}, 200, ""},
		{"one byte over", []string{textItem("a", "ééé"), textItem("b", "xyzwv")}, 502, "CONTEXT_TOO_LARGE"},
		{"an image beside text at the budget", []string{textItem("a", "ééé"), png, textItem("b", "xyzw")}, 200, ""},
	} {
		if status, ans := postRun(t, srv, s.token, runBody("echo:sources", tc.items, "")); status != tc.status || errCode(ans) != tc.code {
			t.Errorf("%s: %d %v, want %d %s", tc.name, status, ans, tc.status, tc.code)
		}
	}
}
