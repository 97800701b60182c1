// Package vendorsim is a loopback simulator of the model vendors' HTTP APIs
// (OpenAI Chat Completions, Anthropic Messages, Gemini generateContent) for
// offline tests of the vendor adapters in plugins/<id>.
//
// A Server is an httptest.Server that speaks one vendor's real request and
// response formats, SSE streams included. It runs in one of two modes:
//
//   - Conformance responder (New with no Script): it decodes each generation
//     request into a vendor-neutral Prompt, decides a Reply from the last
//     user message (the scenarios of wire-core §16, "conformance:text",
//     "conformance:tools", … plus the failure modes named "vendorsim:<fault>",
//     see Fault), and encodes it in the vendor's format. It also serves the
//     vendor's models list, paginated the vendor's way.
//   - Transcript replay (Options.Script): it answers the n-th request with the
//     n-th recorded response of a txtar transcript, byte for byte.
//     simtest.Replay runs a whole transcript file against an adapter and
//     compares the request the adapter sent and the items it emitted with the
//     ones recorded.
//
// Either way every request is recorded (Requests) with the credential header
// redacted and checked against Options.APIKey: the host, not the plugin,
// injects credentials, so a test asserts that the right header reached the
// vendor without ever reading the key from a recording. A streamed response
// whose client went away is counted (Cancellations, WaitCancelled), which is
// how tests prove that cancelling a run aborts the upstream request.
//
// # Adding a vendor
//
// Each vendor is one file, <vendor>.go, with a type implementing Vendor that
// registers itself from init with Register. The core (server.go, scenario.go,
// transcript.go) knows nothing vendor-specific: routing, request decoding,
// error bodies, SSE event shapes, terminal markers and models pagination all
// belong to the Vendor. openai.go is the reference implementation.
//
// # Transcripts
//
// A transcript is plugins/<id>/testdata/<case>.txtar. The comment section is
// free text plus directives, one per line, "name: value", optionally prefixed
// by a turn number ("2/status: 429") for multi-turn cases:
//
//	op: complete            complete (default) or inspect
//	status: 429             response status (default 200)
//	header: retry-after: 2  a response header (repeatable)
//	method: POST            expected request method (default POST for complete, GET for inspect)
//	path: /v1/chat/completions   expected request path (checked when given)
//	query: after=b          expected raw query (checked when given)
//	repeat-bytes: 10600000  repeat response.repeat.sse until this many bytes were written
//	hold: true              keep the response open afterwards until the client leaves
//	2/continue: true        turn 2 is a further request of turn 1's call (pagination)
//
// Files of turn 1 have plain names, files of turn n > 1 the prefix "n/":
//
//	settings.json        the instance settings (whole case; "endpoint" is filled in)
//	input.json           the abi.CompleteInput the adapter is called with
//	request.json         the request body the adapter must send (compared as JSON)
//	response.sse         response bytes, sent as text/event-stream
//	response.json        response bytes, sent as application/json
//	response.txt         response bytes, sent as text/plain
//	response.repeat.sse  an SSE block repeated after response.sse (oversize streams)
//	response.tail.sse    bytes sent after the repeated block
//	events.jsonl         the items the adapter emitted and its outcome, one Event per line
//
// simtest.Replay with Update set rewrites events.jsonl and request.json from
// what the adapter did (Case.SetFile, Case.Format): review the diff.
//
// # Running adapters
//
// This package is linked into the adhost binary: internal/qualify uses the
// conformance responder for `adhost qualify --simulate`. It therefore must not
// import the testing package or sdk-plugin/sdktest (TestNoTestingInBinary
// checks). The test-only helpers live in internal/vendorsim/simtest: Replay
// and ReplayDir, and SDKRunner, which runs a provider natively through sdktest
// the way the host runs its wasm build (HostOptions: the vendor's credential
// header injected, only the simulator's origin reachable). A plugin's
// conformance tests point sdktest at MustNew(t, vendor, Options{…}); MustNew
// takes a small interface rather than testing.TB for the same reason.
package vendorsim
