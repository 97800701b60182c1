package protocol_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"adhost/runtime/protocol"
)

// typical is a ~1 KB request of the kind clients send.
var typical = []byte(`{"provider":"acme-api","model":"acme-large-2","input":"List three risks in the attached plan and explain each in one sentence. The plan: migrate the billing service to the new cluster over two weekends, with a rollback window of four hours and a freeze on schema changes during the move.","instructions":"Answer tersely. Use plain English. Do not invent facts that are not in the plan.","history":[{"role":"user","content":"What is the plan about?"},{"role":"assistant","content":"It describes moving the billing service to a new cluster."}],"tools":["lookup_ticket","search_docs"],"requiredCapabilities":["tools","textStreaming"],"maxSteps":4,"maxOutputTokens":2048,"idleTimeoutMs":120000,"outputSchema":{"type":"object","properties":{"risks":{"type":"array","items":{"type":"string"},"maxItems":3}},"required":["risks"],"additionalProperties":false},"metadata":{"app":"planner","team":"billing","ticket":"OPS-1234"},"retry":{"maxAttempts":2,"baseDelayMs":500}}`)

func FuzzDecodeRunRequest(f *testing.F) {
	for _, s := range []string{
		string(typical),
		with(""),
		with(`"maxSteps":8.0,"maxSteps":8e0`),
		with(`"metadata":{"":"` + rocket + `"},"history":[]`),
		with(`"tools":["a","a"],"instructions":"\ud83d\ude80\ud800"`),
		with(`"outputSchema":{"a":{"b":[1,2,{"c":null}]},"a":1}`),
		with(`"retry":{"maxAttempts":1,"maxAttempts":5}`),
		`{"Provider":"p"}`, `[]`, `{`, "\xff", `{"provider":"p","model":"m","input":"x"} `,
		`{"provider":"p","model":"m","input":"\ud83d\ude80\udc00\ud800\u0041\ud800x\/\b\f\n\r\t\"\\"}`,
		`{"provider":"p","model":"m","input":"x","metadata":{"a\u0062":"1","ab":"2"}}`,
		`{"provider":"p","model":"m","input":"x","history":[{"role":"user","content":"c","x":[[{"y":-1.5e+3}],true,false,null]}],"history":[]}`,
	} {
		f.Add([]byte(s))
	}
	all := protocol.DecodeOptions{Attachments: true, OutputArtifact: true, Retrieval: true,
		Session: true, Approvals: true, ApplicationTools: true}
	f.Fuzz(func(t *testing.T, body []byte) {
		// Differential: the scanner agrees with the encoding/json-based
		// reference decoder, for the core host and with every extension on.
		for _, opts := range []protocol.DecodeOptions{{}, all} {
			got, err := opts.Decode(body)
			want, refErr := refDecode(opts, body)
			if (err == nil) != (refErr == nil) {
				t.Fatalf("opts %+v: scanner err = %v, reference err = %v", opts, err, refErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("opts %+v: scanner = %+v, reference = %+v", opts, got, want)
			}
		}
		req, err := protocol.DecodeRunRequest(body)
		if err != nil {
			if req != nil {
				t.Fatal("request returned with an error")
			}
			if c := protocol.CodeOf(err); c != protocol.CodeInvalidRequest {
				t.Fatalf("code %s", c)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		b1, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		req2, err := protocol.DecodeRunRequest(b1)
		if err != nil {
			t.Fatalf("re-decode of %s: %v", b1, err)
		}
		b2, err := json.Marshal(req2)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("unstable round trip:\n%s\n%s", b1, b2)
		}
	})
}

func BenchmarkDecodeRunRequest(b *testing.B) {
	if _, err := protocol.DecodeRunRequest(typical); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(typical)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := protocol.DecodeRunRequest(typical); err != nil {
			b.Fatal(err)
		}
	}
}
