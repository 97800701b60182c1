// Package bench holds the host benchmarks behind the targets of issue 3
// (make bench). They run the real stack in process — the fixture extension
// built for wasip1 and loaded with runtime/wasm, the run engine, and
// host.Server — over real loopback TCP, so every number includes HTTP
// parsing, the pipeline, the engine, the wasm guest, SSE framing and
// flushing, and the client's parsing:
//
//   - BenchmarkJSONRun/clients=N: JSON runs of conformance:text at 1 and 8
//     concurrent clients; reports runs/s, p50-ms, p99-ms,
//     bare-ratio, the host's throughput divided by that of a bare net/http
//     handler (decode the same body, write a same-sized JSON answer)
//     measured with the same client, concurrency and op count in rounds
//     alternating with the host's (target: ≥ 0.5 at clients=8, p99 ≤ 5 ms),
//     and guest-µs/run, the fixture provider's own time per run when
//     called directly (a floor no transport work can remove).
//   - BenchmarkBareHTTP/clients=N: that bare handler on its own.
//   - BenchmarkSSE1000Deltas: one SSE run of bench:deltas:1000 per op;
//     reports deltas/s (provider deltas, 1000 per run, however the engine
//     merged them), frames/s (text.delta frames the client parsed),
//     µs/delta (end-to-end wall time per delta) and host-µs/delta (the
//     same minus the time the provider alone takes to produce the deltas,
//     measured in the same run) (targets: ≥ 50,000 deltas/s, ≤ 20 µs per
//     delta added by the host).
//   - BenchmarkSSE32Concurrent/pool=N: 32 concurrent SSE runs per op;
//     reports peak-rss-MiB (highest VmRSS sampled during the ops) and
//     vmhwm-MiB (the process's VmHWM, which also covers whatever ran
//     earlier in the same process) (target: ≤ 400 MiB).
//
// Run them with
//
//	go test -run '^$' -bench . -benchtime 2s ./internal/bench
//
// `go test ./internal/bench` without -bench only runs one smoke test (and
// skips it with -short).
package bench
