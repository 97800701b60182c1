package vendorsim

import (
	"encoding/json"
	"errors"
	"hash/fnv"
	"net/http"
	"strings"
)

// OpenAI embeddings (https://platform.openai.com/docs/api-reference/embeddings),
// which OpenAI-compatible servers speak too, served by the "openai" vendor:
//
//   - POST /v1/embeddings, Authorization: Bearer <key>, body {"model",
//     "input": a string or an array of strings, "encoding_format":
//     "float"|"base64", "dimensions"?}.
//   - 200: {"object":"list","data":[{"object":"embedding","index":i,
//     "embedding":[…]}],"model","usage":{"prompt_tokens","total_tokens"}}.
//   - Errors in the vendor's error shape (openAI.WriteError); a 429 with
//     Retry-After.
//
// The conformance responder answers each input with a deterministic
// vector (EmbeddingVector) of Options.EmbeddingDims values, or of the
// request's dimensions, and counts one prompt token per word. An input
// "vendorsim:<fault>" makes the whole request fail as that generation
// fault would (rate-limit, unauthorized, server-error, bad-request …), or
// misbehave in an embeddings way (the Embed* faults).

// Embedding faults.
const (
	FaultEmbedReversed Fault = "embed-reversed"     // data in reverse order (the indexes still right)
	FaultEmbedMissing  Fault = "embed-missing"      // one vector fewer than inputs
	FaultEmbedQuota    Fault = "insufficient-quota" // OpenAI's 429 for an exhausted quota
)

// DefaultEmbeddingDims is the vector size when neither the request nor
// Options.EmbeddingDims says.
const DefaultEmbeddingDims = 8

// EmbeddingsRequest is an embeddings request as the simulator read it.
type EmbeddingsRequest struct {
	Model          string
	Input          []string
	EncodingFormat string
	Dimensions     int
}

type embeddingsVendor interface {
	embeddingsRoute(r *http.Request) bool
}

func (openAI) embeddingsRoute(r *http.Request) bool {
	return r.Method == http.MethodPost && r.URL.Path == "/v1/embeddings"
}

// ParseEmbeddings decodes an embeddings request body. Like the service,
// it refuses an empty model or input and an encoding other than float or
// base64 (the simulator only writes float).
func ParseEmbeddings(body []byte) (*EmbeddingsRequest, error) {
	var raw struct {
		Model          string          `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     int             `json:"dimensions"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, errors.New("body is not a JSON object")
	}
	req := &EmbeddingsRequest{Model: raw.Model, EncodingFormat: raw.EncodingFormat, Dimensions: raw.Dimensions}
	var one string
	if err := json.Unmarshal(raw.Input, &one); err == nil {
		req.Input = []string{one}
	} else if err := json.Unmarshal(raw.Input, &req.Input); err != nil {
		return nil, errors.New("input must be a string or an array of strings")
	}
	switch {
	case req.Model == "":
		return nil, errors.New("you must provide a model parameter")
	case len(req.Input) == 0:
		return nil, errors.New("input must not be empty")
	case req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64":
		return nil, errors.New("encoding_format must be float or base64")
	case req.EncodingFormat == "base64":
		return nil, errors.New("vendorsim: base64 embeddings are not simulated")
	case req.Dimensions < 0 || req.Dimensions > 4096:
		return nil, errors.New("dimensions out of range")
	}
	for _, in := range req.Input {
		if in == "" {
			return nil, errors.New("input strings must not be empty")
		}
	}
	return req, nil
}

// EmbeddingVector is the simulator's vector for text: dims values in
// [-1, 1) from an FNV hash of the text and the position, never all zero.
func EmbeddingVector(text string, dims int) []float32 {
	v := make([]float32, dims)
	for i := range v {
		h := fnv.New32a()
		h.Write([]byte(text))
		h.Write([]byte{byte(i), byte(i >> 8)})
		v[i] = float32(h.Sum32()%2000)/1000 - 1
	}
	v[0] += 2 // never the zero vector
	return v
}

func (s *Server) serveEmbeddings(w http.ResponseWriter, body []byte) {
	req, err := ParseEmbeddings(body)
	if err != nil {
		s.vendor.WriteError(w, &HTTPError{Status: http.StatusBadRequest, Message: err.Error()})
		return
	}
	fault := s.opts.Fault
	for _, in := range req.Input {
		if f, ok := strings.CutPrefix(strings.TrimSpace(in), FaultPrefix); ok && fault == FaultNone {
			fault = Fault(f)
		}
	}
	switch fault {
	case FaultNone, FaultEmbedReversed, FaultEmbedMissing:
	case FaultEmbedQuota:
		s.vendor.WriteError(w, &HTTPError{Status: 429, Type: "insufficient_quota", Code: "insufficient_quota",
			Message: "You exceeded your current quota, please check your plan and billing details."})
		return
	default:
		if a := faultAnswer(fault); a.Error != nil {
			s.vendor.WriteError(w, a.Error)
			return
		}
	}
	dims := req.Dimensions
	if dims == 0 {
		dims = s.opts.EmbeddingDims
	}
	if dims == 0 {
		dims = DefaultEmbeddingDims
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	}
	data := make([]item, 0, len(req.Input))
	tokens := 0
	for i, in := range req.Input {
		data = append(data, item{Object: "embedding", Index: i, Embedding: EmbeddingVector(in, dims)})
		tokens += len(strings.Fields(in))
	}
	switch fault {
	case FaultEmbedReversed:
		for i, j := 0, len(data)-1; i < j; i, j = i+1, j-1 {
			data[i], data[j] = data[j], data[i]
		}
	case FaultEmbedMissing:
		data = data[:len(data)-1]
	}
	out, _ := json.Marshal(map[string]any{
		"object": "list", "data": data, "model": req.Model,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens},
	})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", "req_sim")
	w.Write(out)
}
