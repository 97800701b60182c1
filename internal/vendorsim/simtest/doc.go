// Package simtest holds the test-only half of internal/vendorsim: running
// recorded transcripts against an adapter (Replay, ReplayDir) and running an
// adapter natively through sdk-plugin/sdktest the way the host would
// (SDKRunner, HostOptions, EventsOf).
//
// It is a separate package because vendorsim itself is linked into the
// production adhost binary (`adhost qualify --simulate` starts a conformance
// responder through internal/qualify), and these helpers need the testing
// package and sdktest. Keeping them here keeps both out of the binary;
// vendorsim's TestNoTestingInBinary guards that.
//
// A plugin's transcript test is
//
//	simtest.ReplayDir(t, "testdata", simtest.ReplayOptions{
//		Vendor: "openai", APIKey: testKey, Update: *update,
//		Run: simtest.SDKRunner(provider{}),
//	})
//
// Replay with Update set rewrites events.jsonl and request.json from what the
// adapter did (the go/printer "-update" convention): review the diff. The
// transcript format is documented in package vendorsim.
package simtest
