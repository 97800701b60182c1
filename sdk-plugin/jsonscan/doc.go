// Package jsonscan pulls single values out of a JSON document without
// reflection and, on the common path, without allocating.
//
// It exists for the per-event path of vendor adapters: a streamed model turn
// is hundreds of small JSON events, and decoding each into structs with
// encoding/json costs several times more guest CPU than the host spends on
// the whole stream (DESIGN.md §5). An adapter instead asks for the few fields
// it needs:
//
//	v, err := jsonscan.Get(data, "choices[0].delta.content")
//	if err == nil && v.Kind() == jsonscan.String {
//		buf, _ = v.AppendString(buf[:0])
//	}
//
// In a sandboxed guest the cost is per byte scanned and per call (a Go
// guest under wazero paid ~45 ns per iteration of a byte loop with
// close-on-context-done, ~10× native, and still pays several times native
// with the host's checkpoints), so read each event once: Pick takes several
// members of an object in one pass, and Get, Pick and Iter on a Value only
// skip through bytes validated when the Value was found, never validating
// them again:
//
//	var top, choice [2]jsonscan.Value
//	err := jsonscan.Pick(data, top[:], "choices", "usage")
//	first, err := top[0].Get("[0]")
//	err = first.Pick(choice[:], "delta", "finish_reason")
//
// Measured for a ~300 B OpenAI chunk in such a guest: this pattern ~35 µs
// (validating the chunk ~13 µs of it; the same reads re-validating each
// level cost ~43 µs), encoding/json into a struct ~190 µs.
//
// Decoder is for decoding a whole document into Go values (the SDK's op
// input): it reads front to back in one validating pass, entering the
// containers the caller descends into, where Pick and Iter below it would
// skip each nested level again.
//
// AppendQuote and AppendCompact are the encoding side: a JSON string
// literal and a validated, compacted raw value, for writing JSON by hand
// without reflection.
//
// Paths are keys separated by '.', with "[n]" for array elements
// ("usageMetadata.promptTokenCount", "[0].id"). Keys containing '.' or '['
// cannot be named in a path; use Iter for them.
//
// Semantics follow encoding/json (v1) so that adapters see the values the
// vendor meant: the first scan of a document validates the grammar of
// every container it walks (malformed input is an error, never a panic),
// the last of duplicate keys wins, keys match after unescaping, strings are unescaped with \uXXXX
// surrogate pairs combined and invalid UTF-8 or lone surrogates replaced by
// U+FFFD, and nesting deeper than 10000 levels is an error. The fuzz tests
// check this agreement.
package jsonscan
