package retrieval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/attachments"
	"adhost/runtime/attachments/attachmentstest"
	"adhost/runtime/durable"
	"adhost/runtime/protocol"
	"adhost/runtime/retrieval/retrievaltest"
)

// hookTools runs hook when the model calls "t": the test changes the
// store between the search and the next step.
type hookTools struct{ hook func() }

func (hookTools) Tools(context.Context) ([]abi.ToolDef, error) { return nil, nil }
func (h hookTools) Invoke(context.Context, abi.ToolCall, func()) (json.RawMessage, error) {
	if h.hook != nil {
		h.hook()
	}
	return json.RawMessage(`{}`), nil
}

type evidenceEnv struct {
	svc  *Service
	prov *attachmentstest.ToolThenAnswer
	e    *runtime.Engine
}

func newEvidenceEnv(t *testing.T, hook func(*Service), mod func(*Corpus)) *evidenceEnv {
	t.Helper()
	return newEvidenceEnvWith(t, hook, mod, attachments.Options{})
}

func newEvidenceEnvWith(t *testing.T, hook func(*Service), mod func(*Corpus), ctxOpts attachments.Options) *evidenceEnv {
	t.Helper()
	env := &evidenceEnv{prov: &attachmentstest.ToolThenAnswer{Answer: "answer"}}
	env.svc = open(t, durable.NewMemory(), testCorpus(&retrievaltest.Embedder{Dim: 32}, mod))
	var tools hookTools
	if hook != nil {
		tools.hook = func() { hook(env.svc) }
	}
	var err error
	env.e, err = runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{{ID: "p", Vendor: "test", AuthMode: "none", AccountID: "a",
			Capabilities: map[string]bool{"tools": true}, Provider: env.prov}},
		Tools:   []*runtime.Tool{{Def: abi.ToolDef{Name: "t", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)}, Set: tools}},
		Context: attachments.New(withEvidence(ctxOpts, env.svc)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.e.Shutdown(context.Background()) })
	return env
}

func withEvidence(o attachments.Options, s *Service) attachments.Options {
	o.Evidence = s
	return o
}

func runPrincipal(subject string, corpora ...string) *runtime.Principal {
	p := principal(subject, corpora...)
	p.Providers = map[string]bool{"p": true}
	p.Tools = map[string]bool{"t": true}
	return p
}

func retrievalRun(option, attachmentsJSON string) *protocol.RunRequest {
	req := &protocol.RunRequest{Provider: "p", Model: "m", Input: "battery life", Tools: []string{"t"}, Retrieval: json.RawMessage(option)}
	if attachmentsJSON != "" {
		req.Attachments = json.RawMessage(attachmentsJSON)
	}
	return req
}

// events runs req in stream mode and returns its event types and the
// terminal event's data.
func (env *evidenceEnv) events(t *testing.T, p *runtime.Principal, req *protocol.RunRequest) ([]string, []byte) {
	t.Helper()
	run, err := env.e.Start(t.Context(), p, req, runtime.ModeStream)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	var types []string
	for {
		ev, err := run.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
		if ev.Terminal() {
			return types, ev.Data
		}
	}
}

func indexTwo(t *testing.T, s *Service, p *runtime.Principal, rev string) {
	t.Helper()
	for _, d := range []*IndexRequest{
		{Corpus: "docs", Source: Source{ID: "cells", Revision: rev, Title: "Cells", Location: &Location{Page: 3}}, Chunks: []Chunk{
			{ID: "cells-1", Text: "The battery lasted 812 hours.", Location: &Location{StartLine: 4, EndLine: 5}},
			{ID: "cells-2", Text: "Battery life fell after 400 cycles.", Location: &Location{StartLine: 9, EndLine: 9}}}},
		{Corpus: "docs", Source: Source{ID: "other", Revision: "r1"}, Chunks: []Chunk{{ID: "other-1", Text: "Unrelated text about gardens."}}},
	} {
		if _, err := s.Put(t.Context(), p, d, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunWithRetrieval: the search runs after run.started with
// run.progress phase "context" and before the first step; the passages
// reach the model after the attachments as untrusted data with chunk ids;
// result.retrieval is the RetrievalResult and result.sources lists each
// passage with origin "retrieval", its document revision and id, and the
// SHA-256 of exactly the passage bytes.
func TestRunWithRetrieval(t *testing.T) {
	env := newEvidenceEnv(t, nil, nil)
	alice := runPrincipal("alice", "docs")
	indexTwo(t, env.svc, alice, "r1")
	req := retrievalRun(`{"corpus":"docs","query":"battery hours cycles","limit":2,"sourceIds":["cells"]}`,
		`[{"type":"text","source":{"id":"brief","revision":"b1"},"mediaType":"text/plain","text":"Summarise."}]`)
	req.OutputArtifact = json.RawMessage(`{"name":"a.md","mediaType":"text/markdown"}`)
	types, data := env.events(t, alice, req)
	if got := strings.Join(types[:3], ","); got != "run.started,run.progress,step.started" {
		t.Errorf("events %v", types)
	}
	if types[len(types)-1] != runtime.EventRunCompleted {
		t.Fatalf("terminal %s", data)
	}
	var ev struct {
		Phase  string
		Result struct {
			Artifacts []struct{ SourceIDs []string }
			Retrieval *Result
			Sources   []struct {
				ID, Revision, MediaType, Sha256, Origin string
				Bytes                                   int
				Location                                *Location
			}
		}
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		t.Fatal(err)
	}
	r := ev.Result.Retrieval
	if r == nil || r.Corpus != "docs" || r.Index.Model != "hash-ngram-32" || len(r.Hits) != 2 {
		t.Fatalf("result.retrieval %s", data)
	}
	srcs := ev.Result.Sources
	if len(srcs) != 3 || srcs[0].ID != "brief" || srcs[0].Origin != "inline" {
		t.Fatalf("sources %s", data)
	}
	for i, h := range r.Hits {
		s := srcs[i+1]
		sum := sha256.Sum256([]byte(h.Text))
		if s.ID != h.ChunkID || s.Origin != "retrieval" || s.Revision != "r1" || s.MediaType != "text/plain" ||
			s.Bytes != len(h.Text) || s.Sha256 != hex.EncodeToString(sum[:]) || s.Location == nil || s.Location.DocumentID != "cells" ||
			s.Location.Page != 3 || s.Location.StartLine == 0 {
			t.Errorf("source %d %+v for hit %+v", i, s, h)
		}
	}
	if a := ev.Result.Artifacts; len(a) != 1 || strings.Join(a[0].SourceIDs, ",") != "brief,"+r.Hits[0].ChunkID+","+r.Hits[1].ChunkID {
		t.Errorf("artifact sourceIds %s", data)
	}
	in := env.prov.Inputs()[0]
	if !strings.Contains(in.Instructions, "untrusted reference data") {
		t.Errorf("instructions %q", in.Instructions)
	}
	u := in.Messages[0].Content
	if !strings.HasPrefix(u, "battery life\n\n") || strings.Index(u, `"id":"brief"`) > strings.Index(u, `"id":"cells-`) ||
		!strings.Contains(u, `"text":"The battery lasted 812 hours."`) || !strings.Contains(u, `"documentId":"cells"`) {
		t.Errorf("user turn %q", u)
	}
}

// TestRetrievalRecheck: the evidence is re-authorized before every step:
// a new revision of a cited document between steps is CONTEXT_CHANGED, a
// deleted document CONTEXT_NOT_FOUND — after one step, never a second.
func TestRetrievalRecheck(t *testing.T) {
	alice := runPrincipal("alice", "docs")
	alice.CredentialDigest = "alice-credential"
	// now installs what the configuration holds for alice's credential
	// after a reload (SetPrincipals).
	now := func(p *runtime.Principal) func(*Service) {
		return func(s *Service) {
			s.SetPrincipals(func(d string) *runtime.Principal {
				if d != alice.CredentialDigest {
					t.Errorf("looked up credential %q", d)
				}
				return p
			})
		}
	}
	for _, tc := range []struct {
		name string
		hook func(*Service)
		want protocol.Code
	}{
		{"new revision", func(s *Service) {
			indexTwo(t, s, alice, "r2")
		}, CodeContextChanged},
		{"deleted", func(s *Service) {
			if _, err := s.Remove(context.Background(), alice, &DeleteRequest{Corpus: "docs", SourceID: "cells", Revision: "r1"}); err != nil {
				t.Error(err)
			}
		}, CodeContextNotFound},
		{"unrelated change", func(s *Service) {
			s.Put(context.Background(), alice, &IndexRequest{Corpus: "docs", Source: Source{ID: "other", Revision: "r2"}, Chunks: []Chunk{{ID: "other-2", Text: "Gardens again."}}}, nil)
		}, ""},
		{"grant revoked by a reload", now(runPrincipal("alice", "elsewhere")), protocol.CodeForbidden},
		{"credential removed by a reload", now(nil), protocol.CodeForbidden},
		{"grant kept by a reload", now(runPrincipal("alice", "docs")), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEvidenceEnv(t, tc.hook, nil)
			indexTwo(t, env.svc, alice, "r1")
			types, data := env.events(t, alice, retrievalRun(`{"corpus":"docs","query":"battery","sourceIds":["cells"]}`, ""))
			if tc.want == "" {
				if types[len(types)-1] != runtime.EventRunCompleted || len(env.prov.Inputs()) != 2 {
					t.Errorf("%v %s", types, data)
				}
				return
			}
			if types[len(types)-1] != runtime.EventRunFailed || !strings.Contains(string(data), `"code":"`+string(tc.want)+`"`) || len(env.prov.Inputs()) != 1 {
				t.Errorf("%d steps, %v %s, want run.failed %s", len(env.prov.Inputs()), types, data, tc.want)
			}
		})
	}
}

// TestRetrievalRefusals: every refusal of the option in its place — no
// service, the schema, the attachment budget at its edge, the corpus
// grant — and at execution: no evidence, another subject's source under
// subject scope (the same answer as a missing one), an attachment whose
// id is a retrieved chunk id.
func TestRetrievalRefusals(t *testing.T) {
	items := func(n int) string {
		var b []string
		for i := range n {
			b = append(b, `{"type":"text","source":{"id":"a`+string(rune('a'+i))+`","revision":"1"},"mediaType":"text/plain","text":"x"}`)
		}
		return "[" + strings.Join(b, ",") + "]"
	}
	env := newEvidenceEnv(t, nil, func(c *Corpus) { c.Scope = ScopeSubject })
	alice, bob := runPrincipal("alice", "docs"), runPrincipal("bob", "docs")
	indexTwo(t, env.svc, alice, "r1")
	start := func(p *runtime.Principal, req *protocol.RunRequest) error {
		_, err := env.e.Start(t.Context(), p, req, runtime.ModeJSON)
		return err
	}
	wantCode(t, "bad schema", start(alice, retrievalRun(`{"corpus":"docs","limit":17}`, "")), CodeInvalidRetrieval)
	wantCode(t, "unknown member", start(alice, retrievalRun(`{"corpus":"docs","extra":1}`, "")), CodeInvalidRetrieval)
	wantCode(t, "9 attachments + 8", start(alice, retrievalRun(`{"corpus":"docs"}`, items(9))), CodeInvalidRetrieval)
	wantCode(t, "no grant", start(runPrincipal("alice"), retrievalRun(`{"corpus":"docs"}`, "")), protocol.CodeForbidden)
	// The order of wire-core §3.3: retrieval (2–3) before the key (4) and
	// the provider (5); every validation code before the grant.
	unknown := func(option, items string) *protocol.RunRequest {
		r := retrievalRun(option, items)
		r.Provider = "zz"
		key := "k"
		r.IdempotencyKey = &key
		return r
	}
	wantCode(t, "schema before the key and provider", start(runPrincipal("alice"), unknown(`{"corpus":"docs","limit":0}`, "")), CodeInvalidRetrieval)
	wantCode(t, "budget before the key and provider", start(runPrincipal("alice"), unknown(`{"corpus":"docs"}`, items(9))), CodeInvalidRetrieval)
	wantCode(t, "then the key", start(runPrincipal("alice"), unknown(`{"corpus":"docs"}`, "")), protocol.CodeIdempotencyUnavailable)
	noKey := unknown(`{"corpus":"docs"}`, "")
	noKey.IdempotencyKey = nil
	wantCode(t, "then the provider", start(runPrincipal("alice"), noKey), protocol.CodeUnknownProvider)
	// 8 attachments + 8 is exactly the bound: it runs.
	types, _ := env.events(t, alice, retrievalRun(`{"corpus":"docs","query":"battery"}`, items(8)))
	if types[len(types)-1] != runtime.EventRunCompleted {
		t.Errorf("8 + 8: %v", types)
	}
	failed := func(what string, p *runtime.Principal, req *protocol.RunRequest, code protocol.Code) {
		t.Helper()
		types, data := env.events(t, p, req)
		if types[len(types)-1] != runtime.EventRunFailed || !strings.Contains(string(data), `"code":"`+string(code)+`"`) {
			t.Errorf("%s: %v %s, want %s", what, types, data, code)
		}
	}
	failed("no evidence", alice, retrievalRun(`{"corpus":"docs","query":"battery","minScore":1}`, ""), CodeNoEvidence)
	failed("bob's view of alice's source", bob, retrievalRun(`{"corpus":"docs","sourceIds":["cells"]}`, ""), CodeContextNotFound)
	failed("bob's view of a missing source", bob, retrievalRun(`{"corpus":"docs","sourceIds":["nothing"]}`, ""), CodeContextNotFound)
	failed("bob sees nothing", bob, retrievalRun(`{"corpus":"docs"}`, ""), CodeNoEvidence)
	failed("chunk id taken", alice, retrievalRun(`{"corpus":"docs","query":"battery 812","limit":1}`,
		`[{"type":"text","source":{"id":"cells-1","revision":"1"},"mediaType":"text/plain","text":"x"}]`), attachments.CodeInvalidContext)

	noService, err := runtime.New(runtime.Options{
		Providers: []*runtime.ProviderInstance{{ID: "p", Vendor: "test", AuthMode: "none", AccountID: "a", Provider: &attachmentstest.ToolThenAnswer{Answer: "answer"}}},
		Context:   attachments.New(attachments.Options{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer noService.Shutdown(context.Background())
	_, err = noService.Start(t.Context(), alice, &protocol.RunRequest{Provider: "p", Model: "m", Input: "x", Retrieval: json.RawMessage(`{"corpus":"docs"}`)}, runtime.ModeJSON)
	wantCode(t, "no service", err, protocol.CodeRetrievalUnavailable)
}

// TestRecheckRecorded: a recorded result.retrieval is re-authorized
// without embedding (replay, job reads).
func TestRecheckRecorded(t *testing.T) {
	emb := &retrievaltest.Embedder{Dim: 32}
	s := open(t, durable.NewMemory(), testCorpus(emb, nil))
	alice := runPrincipal("alice", "docs")
	indexTwo(t, s, alice, "r1")
	res, err := s.Find(t.Context(), alice, &SearchRequest{Corpus: "docs", Query: "battery", Limit: 8, MaxContextBytes: MaxContextBytes, MinScore: -1})
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := marshal(res)
	calls := emb.Calls.Load()
	if err := s.Recheck(t.Context(), alice, rec); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "no grant", s.Recheck(t.Context(), runPrincipal("alice"), rec), protocol.CodeForbidden)
	wantCode(t, "no record", s.Recheck(t.Context(), alice, nil), protocol.CodeContextReplayUnavailable)
	indexTwo(t, s, alice, "r2")
	wantCode(t, "new revision", s.Recheck(t.Context(), alice, rec), CodeContextChanged)
	if emb.Calls.Load() != calls+1 { // the new revision was embedded in one batch; the rechecks embed nothing
		t.Errorf("embed calls %d → %d", calls, emb.Calls.Load())
	}
}

// TestRetrievalBudgets: retrieved passages count against the run's
// context budgets with the attachments (wire-context §11.4): at the text
// budget the run completes, one byte under it the passage that does not
// fit fails the run with CONTEXT_TOO_LARGE before any step.
func TestRetrievalBudgets(t *testing.T) {
	alice := runPrincipal("alice", "docs")
	const brief = "Summarise." // 10 bytes
	passage := len("The battery lasted 812 hours.")
	for _, tc := range []struct {
		max  int
		want string
	}{{len(brief) + passage, runtime.EventRunCompleted}, {len(brief) + passage - 1, runtime.EventRunFailed}} {
		env := newEvidenceEnvWith(t, nil, nil, attachments.Options{MaxTextBytes: tc.max})
		indexTwo(t, env.svc, alice, "r1")
		types, data := env.events(t, alice, retrievalRun(`{"corpus":"docs","query":"lasted 812 hours","limit":1,"sourceIds":["cells"]}`,
			`[{"type":"text","source":{"id":"brief","revision":"b1"},"mediaType":"text/plain","text":"`+brief+`"}]`))
		if types[len(types)-1] != tc.want || (tc.want == runtime.EventRunFailed && (!strings.Contains(string(data), "CONTEXT_TOO_LARGE") || len(env.prov.Inputs()) != 0)) {
			t.Errorf("max_text_bytes %d: %v %s", tc.max, types, data)
		}
	}
}
