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
// Paths are keys separated by '.', with "[n]" for array elements
// ("usageMetadata.promptTokenCount", "[0].id"). Keys containing '.' or '['
// cannot be named in a path; use Iter for them.
//
// Semantics follow encoding/json (v1) so that adapters see the values the
// vendor meant: the scan validates the grammar of every container it walks
// (malformed input is an error, never a panic), the last of duplicate keys
// wins, keys match after unescaping, strings are unescaped with \uXXXX
// surrogate pairs combined and invalid UTF-8 or lone surrogates replaced by
// U+FFFD, and nesting deeper than 10000 levels is an error. The fuzz tests
// check this agreement.
package jsonscan
