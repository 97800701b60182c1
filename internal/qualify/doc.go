// Package qualify runs the provider conformance scenarios of wire-core §16
// (wire-extensions §10.4) against a provider extension and writes a
// qualification report, for `adhost qualify`.
//
// The scenarios run through the real run engine (package runtime) with a
// fresh engine per scenario, so what is checked is what a client would see:
// event sequences 1..n, one runId, the terminal event, the text, the
// structured output, exactly one tool effect, redaction of private errors,
// cancellation. A discovery probe and, when simulating, the arrival of the
// host-injected credential are checked too.
//
// Two modes:
//
//   - Simulate starts the loopback vendor simulator (internal/vendorsim) for
//     the extension's vendor, binds the pinned extension to it with a
//     generated key, and checks the scenarios strictly: the simulator answers
//     them exactly as §16 says.
//   - Run with Options.Live against a configured provider instance and its
//     real credentials: the scenario that needs a synthetic failure
//     (private-error) is skipped and the checks that depend on the
//     simulator's exact answers are relaxed (a real model is asked, through
//     the instructions, to behave like the scenario).
//
// A Report renders as JSON (Report itself, schema ReportSchema) and as
// Markdown. Storing it is the caller's business.
package qualify
