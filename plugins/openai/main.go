package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

// Plugin identity; must equal manifests/openai.toml.
const (
	pluginID      = "openai"
	pluginVersion = "1.0.0"
)

func main() {}

func init() {
	sdk.SetInfo(pluginID, pluginVersion)
	sdk.RegisterProvider(provider{})
}

// provider is the Chat Completions adapter.
type provider struct{}

var (
	_ sdk.Provider  = provider{}
	_ sdk.Inspector = provider{}
)

// settingsError is returned for settings the host should never have let
// through (it validates them against the manifest's schema first).
func settingsError(err error) error {
	return &sdk.Error{Code: sdk.CodeInternalError, Message: err.Error()}
}

// Complete runs one model turn: POST {endpoint}chat/completions with
// stream: true, then follows the SSE stream until [DONE]. The host injects
// the Authorization header (manifests/openai.toml [[credentials]]); the
// adapter never sees the key.
func (provider) Complete(c *sdk.Call, in *abi.CompleteInput) (*abi.CompleteOutput, error) {
	cfg, err := configFor(c.Config())
	if err != nil {
		return nil, settingsError(err)
	}
	bp := reqBuf.Swap(nil)
	if bp == nil {
		bp = new([]byte)
	}
	body, err := appendRequest(*bp, cfg, in)
	if err != nil {
		reqBuf.Store(bp)
		if se, ok := err.(*sdk.Error); ok {
			return nil, se // a coded refusal (UNSUPPORTED_MODALITY)
		}
		return nil, &sdk.Error{Code: sdk.CodeInternalError, Message: "build request: " + err.Error()}
	}
	req := cfg.streamReq
	if in.Buffered {
		req = cfg.bufferedReq
	}
	resp, err := c.Send(req, body)
	if cap(body) <= maxKeptBuffer {
		*bp = body // the host copied it: free for the next turn
	}
	reqBuf.Store(bp)
	if err != nil {
		return nil, transportError(err, false)
	}
	out, err := readResponse(c, resp, in.Buffered)
	// Closing aborts the upstream request when the turn stopped early
	// (cancellation, a malformed chunk, a refusal). It is not deferred: in
	// wasm a defer costs ~2 µs of guest CPU, and a panic traps the instance
	// anyway (the host then closes its requests).
	resp.Close()
	return out, err
}

// readResponse reads the turn's response: an error status, a JSON
// completion, or the stream. buffered is the turn's CompleteInput.Buffered.
func readResponse(c *sdk.Call, resp *sdk.Response, buffered bool) (*abi.CompleteOutput, error) {
	if resp.Status < 200 || resp.Status > 299 {
		return nil, statusError(resp)
	}
	if ct := resp.Get("content-type"); strings.HasPrefix(ct, "application/json") {
		// A compatible server that ignores stream: true answers with one
		// chat.completion object.
		return completeJSON(c, resp, buffered)
	}
	st := spareStream.Swap(nil)
	if st == nil {
		st = new(turnStream)
	}
	// Its text and scratch buffers are kept for the next turn; everything
	// the output keeps (the text, the tool calls) is copied or fresh.
	*st = turnStream{out: c, text: st.text[:0], buf: st.buf[:0]}
	out, err := st.read(resp)
	keepStream(st)
	return out, err
}

// read follows the stream to its end and returns the turn's output.
func (st *turnStream) read(resp *sdk.Response) (*abi.CompleteOutput, error) {
	for !st.done {
		name, data, err := resp.NextEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, transportError(err, true)
		}
		if err := st.handle(name, data); err != nil {
			return nil, err
		}
	}
	return st.result()
}

// Buffers reused across turns: an instance serves one turn at a time, the
// host copies the request body during http_start, and a turn's output
// copies its text out of the stream state (its tool calls are fresh each
// turn). Each allocation costs about a microsecond in the sandbox. Native
// tests may run turns concurrently: whoever finds a slot empty allocates.
var (
	reqBuf      atomic.Pointer[[]byte]
	spareStream atomic.Pointer[turnStream]
)

// maxKeptBuffer bounds a buffer kept for the next turn: a one-off huge
// request or reply should not pin its memory (wasm memory never shrinks).
const maxKeptBuffer = 1 << 20

// keepStream returns st's buffers for the next turn.
func keepStream(st *turnStream) {
	text, buf := st.text[:0], st.buf[:0]
	if cap(text) > maxKeptBuffer {
		text = nil
	}
	if cap(buf) > maxKeptBuffer {
		buf = nil
	}
	*st = turnStream{text: text, buf: buf}
	spareStream.Store(st)
}

// chatHeaders are the headers of a streamed turn's request, jsonHeaders
// those of a buffered turn (one JSON answer). Each settings value gets its
// requests prepared once (config.streamReq, config.bufferedReq).
var (
	chatHeaders = map[string]string{
		"content-type": "application/json",
		"accept":       "text/event-stream",
	}
	jsonHeaders = map[string]string{
		"content-type": "application/json",
		"accept":       "application/json",
	}
)

// transportError maps a host refusal or failure of an HTTP request.
// midStream reports that the response had started: a network failure then
// cut the stream short.
func transportError(err error, midStream bool) error {
	if errors.Is(err, sdk.ErrCancelled) {
		return sdk.ErrCancelled
	}
	var he *sdk.HTTPError
	if errors.As(err, &he) {
		switch he.Errno {
		case abi.ErrLimit:
			return &sdk.Error{Code: sdk.CodeResponseTooLarge, Message: "upstream stream exceeds the host's bound"}
		case abi.ErrNetwork:
			if midStream {
				return &sdk.Error{Code: sdk.CodeIncompleteStream, Message: "upstream connection failed mid-stream"}
			}
			return &sdk.Error{Code: sdk.CodeProviderUnreachable, Message: "network error", Retryable: true}
		case abi.ErrDenied, abi.ErrRedirect:
			// Not retryable: the same request will be refused again.
			return &sdk.Error{Code: sdk.CodeProviderUnreachable, Message: "request refused by the host: " + he.Errno.Error()}
		}
	}
	var pe *sdk.Error
	if errors.As(err, &pe) {
		return pe
	}
	return &sdk.Error{Code: sdk.CodeInternalError, Message: "http: " + err.Error()}
}

// statusError maps a non-2xx response without reading its body: vendor
// error bodies never leave the adapter, and nothing in them changes the
// code.
func statusError(resp *sdk.Response) error {
	e := sdk.ResponseError(resp)
	if e.Code == sdk.CodeRateLimited && e.RetryAfterMs == 0 {
		e.RetryAfterMs = retryAfterMs(resp.Get)
	}
	return e
}

// retryAfterMs reads retry-after-ms (Azure OpenAI and OpenAI's own SDK
// honour it) or a fractional retry-after in seconds. 0 when unknown.
func retryAfterMs(header func(name string) string) int64 {
	if v, err := strconv.ParseFloat(strings.TrimSpace(header("retry-after-ms")), 64); err == nil && v > 0 && v < 1<<31 {
		return int64(v)
	}
	if v, err := strconv.ParseFloat(strings.TrimSpace(header("retry-after")), 64); err == nil && v > 0 && v < 1<<21 {
		return int64(v * 1000)
	}
	return 0
}

// Inspect reads GET {endpoint}models: read-only, never generates. OpenAI
// returns the whole list in one page; servers that paginate with OpenAI's
// list convention (has_more, last_id → ?after=) are followed up to the caps,
// which end the listing with complete: false.
func (provider) Inspect(c *sdk.Call) (*abi.InspectOutput, error) {
	cfg, err := configFor(c.Config())
	if err != nil {
		return nil, settingsError(err)
	}
	cat := sdk.Catalog{IDs: []string{}}
	out := &abi.InspectOutput{Code: sdk.InspectCatalogAvailable, Models: cat.IDs}
	cursors := map[string]bool{}
	budget := sdk.MaxCatalogBytes
	after := ""
	for page := 0; ; page++ {
		if page == sdk.MaxCatalogPages {
			return out, nil // page cap: complete stays false
		}
		u := cfg.endpoint + "models"
		if after != "" {
			u += "?after=" + url.QueryEscape(after)
		}
		resp, err := c.HTTP(&abi.HTTPRequest{Method: "GET", URL: u, Headers: map[string]string{"accept": "application/json"}}, nil)
		if err != nil {
			if errors.Is(err, sdk.ErrCancelled) {
				return nil, sdk.ErrCancelled
			}
			return &abi.InspectOutput{Code: sdk.InspectProviderUnreachable}, nil
		}
		if code := inspectStatus(resp.Status); code != "" {
			resp.Close()
			return &abi.InspectOutput{Code: code}, nil
		}
		body, err := resp.ReadAll(budget)
		resp.Close()
		if err != nil {
			var pe *sdk.Error
			if errors.As(err, &pe) && pe.Code == sdk.CodeResponseTooLarge {
				return out, nil // byte cap: complete stays false
			}
			if errors.Is(err, sdk.ErrCancelled) {
				return nil, sdk.ErrCancelled
			}
			return &abi.InspectOutput{Code: sdk.InspectProviderUnreachable}, nil
		}
		budget -= len(body)
		pg, ok := parseModelsPage(body)
		if !ok {
			return &abi.InspectOutput{Code: sdk.InspectInvalidResponse}, nil
		}
		for _, id := range pg.ids {
			if !cat.Add(id) {
				return out, nil // id cap: complete stays false
			}
			out.Models = cat.IDs
		}
		if !pg.hasMore {
			out.Complete = true
			return out, nil
		}
		if pg.cursor == "" || cursors[pg.cursor] {
			return &abi.InspectOutput{Code: sdk.InspectInvalidResponse}, nil
		}
		cursors[pg.cursor] = true
		after = pg.cursor
	}
}

// inspectStatus maps a non-2xx models response to an inspection code ("" for
// success). 401 means the host's key was rejected; whether a key is
// configured at all is the host's knowledge (AUTH_REQUIRED), not the
// adapter's.
func inspectStatus(status int) string {
	switch {
	case status >= 200 && status <= 299:
		return ""
	case status == 401:
		return sdk.InspectAuthRejected
	case status == 403:
		return sdk.InspectAccessDenied
	case status == 404:
		return sdk.InspectDiscoveryUnsupported
	case status == 429:
		return sdk.InspectRateLimited
	case status >= 500:
		return sdk.InspectProviderUnreachable
	}
	return sdk.InspectDiscoveryFailed
}

type modelsPage struct {
	ids     []string
	hasMore bool
	cursor  string
}

// parseModelsPage decodes {"object":"list","data":[{"id":…}],…}. A page
// without a data array, or an entry without a string id, is malformed.
func parseModelsPage(b []byte) (modelsPage, bool) {
	var raw struct {
		Data *[]struct {
			ID *string `json:"id"`
		} `json:"data"`
		HasMore *bool   `json:"has_more"`
		LastID  *string `json:"last_id"`
	}
	if json.Unmarshal(b, &raw) != nil || raw.Data == nil {
		return modelsPage{}, false
	}
	var pg modelsPage
	for _, m := range *raw.Data {
		if m.ID == nil || *m.ID == "" {
			return modelsPage{}, false
		}
		pg.ids = append(pg.ids, *m.ID)
	}
	if raw.HasMore != nil && *raw.HasMore {
		pg.hasMore = true
		switch {
		case raw.LastID != nil && *raw.LastID != "":
			pg.cursor = *raw.LastID
		case len(pg.ids) > 0:
			pg.cursor = pg.ids[len(pg.ids)-1]
		}
	}
	return pg, true
}
