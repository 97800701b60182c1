package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/itchyny/gojq"
)

// Bounds of one query. gojq has no step limit, so a hostile query such as
// [range(1e9)] is stopped by the host's compute watchdog (the manifest's
// computeMs) or the instance's memory limit, which fail the call; what is
// bounded here is everything the tool hands back.
const (
	// MaxQueryBytes bounds the query text.
	MaxQueryBytes = 4096
	// MaxResults bounds the values a query may produce.
	MaxResults = 1000
	// MaxOutputBytes bounds the encoded results together: far below the
	// engine's 1,000,000-byte tool output bound, and what a model can
	// still read.
	MaxOutputBytes = 256 << 10
)

// QueryError is a problem with the query or its evaluation (a parse error,
// a type error, a result past a bound). The tool reports it as its output,
// so the model can read it and correct the query.
type QueryError struct {
	Msg string
	// Pos is the byte offset in the query a parse error was found at,
	// or -1.
	Pos int
}

func (e *QueryError) Error() string { return e.Msg }

// Query runs a jq query over a JSON document and returns the encoded
// results (a JSON array, at most MaxResults values, at most
// MaxOutputBytes). The query can read nothing but the document: no
// environment, no modules, no input.
func Query(ctx context.Context, query string, document json.RawMessage) (json.RawMessage, error) {
	if len(query) > MaxQueryBytes {
		return nil, &QueryError{Msg: fmt.Sprintf("query longer than %d bytes", MaxQueryBytes), Pos: -1}
	}
	q, err := gojq.Parse(query)
	if err != nil {
		var pe *gojq.ParseError
		if errors.As(err, &pe) {
			return nil, &QueryError{Msg: "query does not parse: " + pe.Error(), Pos: pe.Offset}
		}
		return nil, &QueryError{Msg: "query does not parse: " + err.Error(), Pos: -1}
	}
	code, err := gojq.Compile(q, gojq.WithEnvironLoader(func() []string { return nil }))
	if err != nil {
		return nil, &QueryError{Msg: "query does not compile: " + err.Error(), Pos: -1}
	}
	doc, err := decodeDocument(document)
	if err != nil {
		return nil, err
	}
	out := bytes.NewBuffer(make([]byte, 0, 256))
	out.WriteByte('[')
	iter := code.RunWithContext(ctx, doc)
	for n := 0; ; n++ {
		v, ok := iter.Next()
		if !ok {
			break
		}
		if err, isErr := v.(error); isErr {
			var he *gojq.HaltError
			if errors.As(err, &he) && he.Value() == nil {
				break // halt: stop without an error
			}
			return nil, &QueryError{Msg: truncate(err.Error(), 1000), Pos: -1}
		}
		if n == MaxResults {
			return nil, &QueryError{Msg: fmt.Sprintf("query produced more than %d results", MaxResults), Pos: -1}
		}
		b, err := gojq.Marshal(v)
		if err != nil {
			return nil, &QueryError{Msg: "a result is not representable as JSON", Pos: -1}
		}
		if out.Len()+len(b)+2 > MaxOutputBytes {
			return nil, &QueryError{Msg: fmt.Sprintf("results larger than %d bytes", MaxOutputBytes), Pos: -1}
		}
		if n > 0 {
			out.WriteByte(',')
		}
		out.Write(b)
	}
	out.WriteByte(']')
	return out.Bytes(), nil
}

// decodeDocument decodes the document into the values gojq works on,
// numbers kept exact (json.Number) so large integers survive.
func decodeDocument(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	if !json.Valid(raw) {
		return nil, &QueryError{Msg: "document is not JSON", Pos: -1}
	}
	return exact(raw)
}

// exact decodes valid JSON level by level through json.RawMessage rather
// than with a json.Decoder (whose UseNumber would do the same): a Decoder
// reads through io.Reader, and an io.Reader call anywhere in the module
// links the SDK's HTTP reader, and with it the http_* imports the host
// refuses a tool without [network].
func exact(raw json.RawMessage) (any, error) {
	raw = bytes.TrimSpace(raw)
	switch raw[0] {
	case '{':
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		out := make(map[string]any, len(m))
		for k, v := range m {
			x, err := exact(v)
			if err != nil {
				return nil, err
			}
			out[k] = x
		}
		return out, nil
	case '[':
		var a []json.RawMessage
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		out := make([]any, len(a))
		for i, v := range a {
			x, err := exact(v)
			if err != nil {
				return nil, err
			}
			out[i] = x
		}
		return out, nil
	case '"', 't', 'f', 'n':
		var v any
		err := json.Unmarshal(raw, &v)
		return v, err
	}
	return json.Number(raw), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
