package e2e_test

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"adhost/host/config"
	"adhost/internal/testenv"
)

// devDefaultSite is the repository's own host.toml — what `make run`
// serves — in a temporary directory, with every pinned extension freshly
// built where its module line points (a pin another toolchain builds
// differently is rewritten to the fresh digest; TestReproducibleDigests
// is the test of the pins themselves).
func devDefaultSite(t *testing.T) *site {
	t.Helper()
	root := testenv.RepoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "host.toml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Decode(doc, filepath.Join(root, "host.toml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	text := string(doc)
	for _, e := range cfg.Extensions {
		b, err := os.ReadFile(testenv.BuildPlugin(t, "plugins/"+e.ID))
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(root, e.Module) // Decode resolved it against host.toml's directory
		if err != nil || strings.HasPrefix(rel, "..") {
			t.Fatalf("module %s is outside the repository", e.Module)
		}
		dst := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
		text = strings.Replace(text, `sha256 = "`+e.SHA256+`"`, `sha256 = "`+digestOf(t, dst)+`"`, 1)
	}
	s := &site{dir: dir, config: filepath.Join(dir, "host.toml"), token: strings.Repeat("dev-default-", 4), plugins: map[string]plugin{}}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(wasmCache, filepath.Join(dir, "data", "wasm-cache")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "dev.token"), []byte(s.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDevDefault: the repository's host.toml, as `make run` serves it,
// shows what issues 12 and 13 promise a newcomer: all four retrieval
// features and the three context features advertised, the fixture model
// taking images and PDFs (and the instance's capability flags), and the
// dev token ingesting a Markdown file and a generated PDF into `docs`,
// searching, running with an image and a PDF attached, and deleting.
func TestDevDefault(t *testing.T) {
	t.Parallel()
	s := devDefaultSite(t)
	srv := startServer(t, s)

	b := protocolBody(t, srv, s.token)
	var proto struct{ Features []string }
	if err := json.Unmarshal([]byte(b), &proto); err != nil {
		t.Fatalf("/v1/protocol %s: %v", b, err)
	}
	for _, f := range []string{"context-inputs", "draft-artifacts", "context-references",
		"scoped-retrieval", "retrieval-indexing", "document-ingestion", "pdf-ingestion"} {
		if !slices.Contains(proto.Features, f) {
			t.Errorf("feature %s not advertised: %v", f, proto.Features)
		}
	}
	_, pb := callRaw(t, "GET", srv.URL+"/v1/providers", map[string][]string{"Authorization": {"Bearer " + s.token}}, "")
	var provs struct {
		Providers []struct {
			ID              string
			Capabilities    map[string]bool
			InputMediaTypes map[string][]string
		}
	}
	if err := json.Unmarshal(pb, &provs); err != nil {
		t.Fatalf("/v1/providers %s: %v", pb, err)
	}
	fixture := false
	for _, p := range provs.Providers {
		if p.ID != "fixture" {
			continue
		}
		fixture = true
		media := p.InputMediaTypes["fixture-model"]
		if !p.Capabilities["images"] || !p.Capabilities["documents"] ||
			!slices.Contains(media, "image/png") || !slices.Contains(media, "image/jpeg") || !slices.Contains(media, "application/pdf") {
			t.Errorf("the fixture entry: %+v", p)
		}
	}
	if !fixture {
		t.Fatalf("no fixture provider: %s", pb)
	}

	md, _ := json.Marshal("# Battery\nThe cell lasted 812 hours.\n")
	for _, body := range []string{
		`{"corpus":"docs","document":{"type":"text","source":{"id":"guide","revision":"r1"},"mediaType":"text/markdown","text":` + string(md) + `}}`,
		`{"corpus":"docs","document":{"type":"pdf","source":{"id":"report","revision":"r1"},"mediaType":"application/pdf","data":"` +
			base64.StdEncoding.EncodeToString(pdfOf(t, "", []string{"Battery report."}, []string{"The battery lasted 812 hours."})) + `"}}`,
	} {
		if st, b := retrievalPost(t, srv, s.token, "/v1/retrieval/ingest", body); st != 200 || !strings.Contains(b, `"status":"indexed"`) {
			t.Fatalf("ingest: %d %s", st, b)
		}
	}
	st, body := retrievalPost(t, srv, s.token, "/v1/retrieval/search", `{"corpus":"docs","query":"battery 812 hours","limit":16}`)
	if st != 200 || !strings.Contains(body, `"documentId":"guide"`) || !strings.Contains(body, `"documentId":"report","page":2`) {
		t.Errorf("search: %d %s", st, body)
	}
	st, ans := postRun(t, srv, s.token, runBody("echo:sources", []string{
		binItem("image", "image/png", "shot", b64(file(pngSig, 64))),
		binItem("pdf", "application/pdf", "contract", b64(file(pdfSig, 64))),
	}, ""))
	if st != 200 || ans["text"] != "sources: shot contract; files: image/png application/pdf" {
		t.Errorf("a run with an image and a PDF: %d %v", st, ans)
	}
	for _, d := range []string{`{"corpus":"docs","sourceId":"guide","revision":"r1"}`, `{"corpus":"docs","sourceId":"report","revision":"r1"}`} {
		if st, b := retrievalPost(t, srv, s.token, "/v1/retrieval/delete", d); st != 200 || !strings.Contains(b, `"deleted":true`) {
			t.Errorf("delete: %d %s", st, b)
		}
	}
}
