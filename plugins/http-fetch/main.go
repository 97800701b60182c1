package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strings"
	"unicode/utf8"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

// ID and Version must equal manifests/http-fetch.toml (a test checks it).
const (
	ID      = "http-fetch"
	Version = "1.0.0"
)

// ToolName is the tool's name.
const ToolName = "http_fetch"

// Bounds of one fetch.
const (
	// MaxBodyBytes bounds the response body read; a larger body is
	// refused (the tool's output would not hold it anyway).
	MaxBodyBytes = 1_000_000
	// MaxTextBytes bounds the text handed back; longer text is cut at a
	// character boundary and marked truncated.
	MaxTextBytes = 200_000
	// MaxURLBytes bounds the URL argument.
	MaxURLBytes = 2048
)

// description and inputSchema must equal manifests/http-fetch.toml.
const (
	description = "Fetches a web page or document with GET and returns its text (HTML reduced to text). Only origins the operator allowlisted can be fetched; redirects are not followed."
	inputSchema = `{"type":"object","properties":{"url":{"type":"string","minLength":1,"maxLength":2048}},"required":["url"],"additionalProperties":false}`
)

func main() {}

func init() {
	sdk.SetInfo(ID, Version)
	sdk.RegisterTools(tools{})
}

type tools struct{}

func (tools) List() []abi.ToolDef {
	return []abi.ToolDef{{Name: ToolName, Description: description, InputSchema: json.RawMessage(inputSchema)}}
}

// result is the tool's output: the page, or why there is none.
type result struct {
	URL         string `json:"url"`
	Status      int    `json:"status,omitempty"`
	ContentType string `json:"contentType,omitempty"`
	Text        string `json:"text,omitempty"`
	Truncated   bool   `json:"truncated,omitempty"`
	Error       string `json:"error,omitempty"`
}

// Invoke fetches the URL. Refusals (an origin not allowlisted, a private
// address, a redirect, a body too large, a response that is not text)
// and network failures are outputs with an "error" member the model
// reads; the request may still have reached the server, which is why the
// tool declares side effects.
func (tools) Invoke(c *sdk.Call, in *abi.ToolInvokeInput) (json.RawMessage, error) {
	if in.Name != ToolName {
		return nil, sdk.Errorf(sdk.CodeToolFailed, "unknown tool %q", in.Name)
	}
	var a struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal(in.Arguments, &a); err != nil {
		return nil, sdk.Errorf(sdk.CodeToolFailed, "arguments do not decode")
	}
	return encode(fetch(c, a.URL)), nil
}

func encode(r *result) json.RawMessage {
	b, _ := json.Marshal(r)
	return b
}

func fetch(c *sdk.Call, raw string) *result {
	res := &result{URL: raw}
	u, err := url.Parse(raw)
	switch {
	case len(raw) > MaxURLBytes:
		res.Error = fmt.Sprintf("the URL is longer than %d bytes", MaxURLBytes)
		return res
	case err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		res.Error = "not an absolute http(s) URL"
		return res
	case u.User != nil:
		res.Error = "URLs with user info are not fetched"
		return res
	}
	u.Fragment = ""
	res.URL = u.String()
	resp, err := c.HTTP(&abi.HTTPRequest{Method: "GET", URL: res.URL, Headers: map[string]string{
		"accept":     "text/html, text/plain;q=0.9, application/json;q=0.9, */*;q=0.5",
		"user-agent": "adhost-http-fetch/" + Version,
	}}, nil)
	if err != nil {
		res.Error = refusal(err)
		return res
	}
	defer resp.Close()
	res.Status = resp.Status
	ctype := resp.Get("content-type")
	mt, _, _ := mime.ParseMediaType(ctype)
	res.ContentType = mt
	body, err := resp.ReadAll(MaxBodyBytes)
	if err != nil {
		var se *sdk.Error
		if errors.As(err, &se) && se.Code == sdk.CodeResponseTooLarge {
			res.Error = fmt.Sprintf("the response body is larger than %d bytes", MaxBodyBytes)
		} else {
			res.Error = refusal(err)
		}
		return res
	}
	switch {
	case mt == "text/html" || mt == "application/xhtml+xml":
		res.Text = Text(string(body))
	case mt == "" && looksLikeHTML(body):
		res.Text = Text(string(body))
	case strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json") ||
		mt == "application/xml" || strings.HasSuffix(mt, "+xml") || (mt == "" && utf8.Valid(body)):
		res.Text = strings.ToValidUTF8(string(body), "\uFFFD")
	default:
		res.Error = fmt.Sprintf("the response is not text (content type %q)", mt)
		return res
	}
	if len(res.Text) > MaxTextBytes {
		cut := MaxTextBytes
		for cut > 0 && !utf8.RuneStart(res.Text[cut]) {
			cut--
		}
		res.Text, res.Truncated = res.Text[:cut], true
	}
	return res
}

func looksLikeHTML(b []byte) bool {
	s := strings.ToLower(strings.TrimSpace(string(b[:min(len(b), 512)])))
	return strings.HasPrefix(s, "<!doctype html") || strings.HasPrefix(s, "<html")
}

// refusal words a failed request for the model.
func refusal(err error) string {
	var he *sdk.HTTPError
	if errors.As(err, &he) {
		switch he.Errno {
		case abi.ErrDenied:
			return "refused: the URL's origin is not allowlisted by the operator, or it resolves to a private address"
		case abi.ErrRedirect:
			return "refused: the server answered with a redirect, and redirects are not followed"
		case abi.ErrLimit:
			return fmt.Sprintf("the response body is larger than %d bytes", MaxBodyBytes)
		case abi.ErrBadRequest:
			return "not a URL the host can request"
		case abi.ErrCancelled:
			return "cancelled"
		}
	}
	return "the request failed (network error)"
}
