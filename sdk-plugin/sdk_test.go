package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/sdktest"
)

// providerFunc adapts a function to sdk.Provider.
type providerFunc func(c *sdk.Call, in *abi.CompleteInput) (*abi.CompleteOutput, error)

func (f providerFunc) Complete(c *sdk.Call, in *abi.CompleteInput) (*abi.CompleteOutput, error) {
	return f(c, in)
}

// countingHost counts the buffer-filling host calls and the capacities they
// were given, to observe the grow-and-retry rule.
type countingHost struct {
	*sdktest.Host
	caps map[string][]int
}

func (h *countingHost) note(name string, n int) { h.caps[name] = append(h.caps[name], n) }
func (h *countingHost) Input(b []byte) int32    { h.note("input", len(b)); return h.Host.Input(b) }
func (h *countingHost) Config(b []byte) int32   { h.note("config", len(b)); return h.Host.Config(b) }
func (h *countingHost) HTTPNextEvent(id int32, b []byte) int64 {
	h.note("next_event", len(b))
	return h.Host.HTTPNextEvent(id, b)
}

func TestBufferGrowth(t *testing.T) {
	// 1.2 MB of input: past the first buffer, and past what the SDK keeps
	// pooled, so the first try is always short.
	big := strings.Repeat("é", 600_000)
	cfg := `{"k":"` + strings.Repeat("v", 3000) + `"}`
	event := strings.Repeat("d", 10_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: big\ndata: %s\n\ndata: small\n\n", event)
	}))
	defer srv.Close()

	h := &countingHost{Host: sdktest.NewHost(t, sdktest.Options{Config: []byte(cfg)}), caps: map[string][]int{}}
	var gotCfg struct{ K string }
	var events []string
	p := providerFunc(func(c *sdk.Call, in *abi.CompleteInput) (*abi.CompleteOutput, error) {
		if err := c.DecodeConfig(&gotCfg); err != nil {
			return nil, err
		}
		r, err := c.HTTP(&abi.HTTPRequest{Method: "GET", URL: srv.URL, Stream: true}, nil)
		if err != nil {
			return nil, err
		}
		defer r.Close()
		for {
			name, data, err := r.NextEvent()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
			events = append(events, string(name)+":"+string(data))
		}
		return &abi.CompleteOutput{Text: ""}, nil
	})
	in := &abi.CompleteInput{Model: "m", Messages: []abi.Message{{Role: abi.RoleUser, Content: big}}, MaxOutputTokens: 1}
	b, _ := json.Marshal(in)
	h.SetInput(b)
	if st := sdk.Dispatch(h, abi.OpComplete, &sdk.Plugin{Provider: p}); st != abi.StatusOK {
		t.Fatalf("status %d: %s", st, h.RawOutput())
	}
	if gotCfg.K != strings.Repeat("v", 3000) {
		t.Errorf("config not read in full: %d bytes", len(gotCfg.K))
	}
	want := []string{"big:" + event, "message:small"}
	if fmt.Sprint(events) != fmt.Sprint(want) {
		t.Errorf("events = %.40q…, want %.40q…", events, want)
	}
	if c := h.caps["input"]; len(c) != 2 || c[1] < len(b) {
		t.Errorf("input capacities = %v, want one short try then ≥ %d", c, len(b))
	}
	if c := h.caps["config"]; len(c) != 2 || c[1] < len(cfg) {
		t.Errorf("config capacities = %v, want one short try then ≥ %d", c, len(cfg))
	}
	// big event: short try, grown retry; small event; EOF.
	if c := h.caps["next_event"]; len(c) != 4 || c[0] >= len(event) || c[1] < len(event) {
		t.Errorf("next_event capacities = %v", c)
	}
}

func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		cancel    bool
		want      abi.ErrorOutput
		cancelled bool
	}{
		{name: "sdk error", err: &sdk.Error{Code: "RATE_LIMITED", Message: "slow down", Retryable: true, Status: 429, RetryAfterMs: 2000},
			want: abi.ErrorOutput{Code: "RATE_LIMITED", Message: "slow down", Retryable: true, Status: 429, RetryAfterMs: 2000}},
		{name: "wrapped sdk error", err: fmt.Errorf("turn: %w", sdk.Errorf(sdk.CodeProviderUnreachable, "dial")),
			want: abi.ErrorOutput{Code: "PROVIDER_UNREACHABLE", Message: "dial", Retryable: true}},
		{name: "plain error", err: errors.New("boom"), want: abi.ErrorOutput{Code: "INTERNAL_ERROR", Message: "boom"}},
		{name: "network", err: &sdk.HTTPError{Errno: abi.ErrNetwork},
			want: abi.ErrorOutput{Code: "PROVIDER_UNREACHABLE", Message: "sdk: http: network error", Retryable: true}},
		{name: "limit", err: &sdk.HTTPError{Errno: abi.ErrLimit},
			want: abi.ErrorOutput{Code: "RESPONSE_TOO_LARGE", Message: "sdk: http: limit exceeded"}},
		{name: "cancelled", err: sdk.ErrCancelled, cancelled: true},
		{name: "http cancelled", err: fmt.Errorf("read: %w", &sdk.HTTPError{Errno: abi.ErrCancelled}), cancelled: true},
		{name: "any error after cancel", err: errors.New("boom"), cancel: true, cancelled: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := providerFunc(func(c *sdk.Call, _ *abi.CompleteInput) (*abi.CompleteOutput, error) { return nil, tc.err })
			opts := sdktest.Options{}
			if tc.cancel {
				ctx, cancel := contextCancelled(t)
				defer cancel()
				opts.Context = ctx
			}
			res := sdktest.Complete(t, p, &abi.CompleteInput{}, opts)
			if tc.cancelled {
				if res.Status != abi.StatusCancelled {
					t.Fatalf("status = %d, want cancelled", res.Status)
				}
				return
			}
			if res.Status != abi.StatusError || *res.Error != tc.want {
				t.Fatalf("status %d, error %+v; want %+v", res.Status, res.Error, tc.want)
			}
		})
	}
}

func TestToolErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		out    json.RawMessage
		err    error
		status abi.Status
		code   string
		output string
	}{
		{name: "ok", out: json.RawMessage(`{"a":1}`), status: abi.StatusOK, output: `{"a":1}`},
		{name: "nil output is null", status: abi.StatusOK, output: `null`},
		{name: "invalid json", out: json.RawMessage(`{`), status: abi.StatusError, code: "TOOL_FAILED"},
		{name: "plain error", err: errors.New("disk"), status: abi.StatusError, code: "TOOL_FAILED"},
		{name: "http error stays a tool failure", err: &sdk.HTTPError{Errno: abi.ErrNetwork}, status: abi.StatusError, code: "TOOL_FAILED"},
		{name: "coded", err: sdk.Errorf("APPROVAL_REQUIRED", "x"), status: abi.StatusError, code: "APPROVAL_REQUIRED"},
		{name: "cancelled", err: sdk.ErrCancelled, status: abi.StatusCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := toolSet{invoke: func(*sdk.Call, *abi.ToolInvokeInput) (json.RawMessage, error) { return tc.out, tc.err }}
			res := sdktest.Invoke(t, ts, &abi.ToolInvokeInput{CallID: "c", Name: "t", Arguments: json.RawMessage(`{}`)}, sdktest.Options{})
			if res.Status != tc.status {
				t.Fatalf("status = %d, want %d", res.Status, tc.status)
			}
			if tc.code != "" && res.Error.Code != tc.code {
				t.Errorf("code = %s, want %s", res.Error.Code, tc.code)
			}
			if tc.output != "" && string(res.Output) != tc.output {
				t.Errorf("output = %s, want %s", res.Output, tc.output)
			}
		})
	}
}

type toolSet struct {
	invoke func(*sdk.Call, *abi.ToolInvokeInput) (json.RawMessage, error)
}

func (toolSet) List() []abi.ToolDef { return nil }
func (s toolSet) Invoke(c *sdk.Call, in *abi.ToolInvokeInput) (json.RawMessage, error) {
	return s.invoke(c, in)
}

type inspector struct{ providerFunc }

func (inspector) Inspect(*sdk.Call) (*abi.InspectOutput, error) {
	return &abi.InspectOutput{Code: sdk.InspectAuthRejected}, nil
}

func TestOps(t *testing.T) {
	p := providerFunc(func(*sdk.Call, *abi.CompleteInput) (*abi.CompleteOutput, error) { return nil, nil })

	if got := sdktest.Inspect(t, p, sdktest.Options{}); got.Output.Code != sdk.InspectDiscoveryUnsupported {
		t.Errorf("inspect without Inspector = %+v", got.Output)
	}
	if got := sdktest.Inspect(t, inspector{p}, sdktest.Options{}); got.Output.Code != sdk.InspectAuthRejected {
		t.Errorf("inspect = %+v", got.Output)
	}
	if res := sdktest.Complete(t, p, &abi.CompleteInput{}, sdktest.Options{}); res.Status != abi.StatusError || res.Error.Code != "INTERNAL_ERROR" {
		t.Errorf("nil output and nil error: %+v", res.Error)
	}
	if tools := sdktest.ListTools(t, toolSet{}); tools == nil || len(tools) != 0 {
		t.Errorf("nil List = %#v, want empty", tools)
	}
	info := sdktest.Info(t, &sdk.Plugin{Info: sdk.Info{ID: "x", Version: "1.2.3"}, Tools: toolSet{}})
	if info != (abi.Info{ID: "x", Version: "1.2.3", Kind: abi.KindTool}) {
		t.Errorf("info = %+v", info)
	}
	for _, tc := range []struct {
		op abi.Op
		p  *sdk.Plugin
	}{
		{abi.OpInfo, &sdk.Plugin{Provider: p}},                              // no id
		{abi.OpInfo, &sdk.Plugin{Info: sdk.Info{ID: "x"}}},                  // nothing registered
		{abi.OpComplete, &sdk.Plugin{Tools: toolSet{}}},                     // wrong kind
		{abi.OpToolInvoke, &sdk.Plugin{Provider: p}},                        // wrong kind
		{abi.OpToolList, &sdk.Plugin{Provider: p}},                          // wrong kind
		{abi.OpInspect, &sdk.Plugin{Tools: toolSet{}}},                      // wrong kind
		{abi.OpEmbed, &sdk.Plugin{Provider: p}},                             // unsupported
		{abi.Op(99), &sdk.Plugin{Provider: p}},                              // unknown
		{abi.OpComplete, &sdk.Plugin{Provider: p, Info: sdk.Info{ID: "x"}}}, // no input: bad JSON
	} {
		h := sdktest.NewHost(t, sdktest.Options{})
		if st := sdk.Dispatch(h, tc.op, tc.p); st != abi.StatusError {
			t.Errorf("op %v on %+v: status %d, want error", tc.op, tc.p, st)
			continue
		}
		var e abi.ErrorOutput
		if err := json.Unmarshal(h.RawOutput(), &e); err != nil || e.Code != "INTERNAL_ERROR" {
			t.Errorf("op %v: error output %s", tc.op, h.RawOutput())
		}
	}
}

func TestEmit(t *testing.T) {
	var cancelledAt int
	p := providerFunc(func(c *sdk.Call, _ *abi.CompleteInput) (*abi.CompleteOutput, error) {
		c.EmitText("")
		c.EmitText("a")
		c.EmitTextBytes([]byte("b"))
		c.Progress()
		c.ToolCallDelta()
		in, out := int64(3), int64(2)
		c.EmitUsage(abi.Usage{InputTokens: &in, OutputTokens: &out})
		c.Log(abi.LogDebug, "dropped by level")
		c.Log(abi.LogWarn, "kept")
		if c.LogEnabled(abi.LogInfo) {
			t.Error("LogEnabled(info) with level warn")
		}
		for i := 1; i <= 3; i++ {
			if c.EmitText("c") {
				cancelledAt = i
				break
			}
		}
		if !c.Cancelled() {
			t.Error("Cancelled() = false after cancellation")
		}
		return nil, sdk.ErrCancelled
	})
	res := sdktest.Complete(t, p, &abi.CompleteInput{}, sdktest.Options{
		LogLevel: abi.LogWarn,
		OnEmit: func(h *sdktest.Host, it sdktest.Item) {
			if it.Kind == abi.EmitText && it.Text == "c" {
				h.Cancel() // the second "c" is then dropped
			}
		},
	})
	if res.Status != abi.StatusCancelled || cancelledAt != 1 {
		t.Fatalf("status %d, cancelled at %d", res.Status, cancelledAt)
	}
	if res.Text != "abc" || res.Progress != 1 || res.ToolCallDeltas != 1 {
		t.Errorf("text %q progress %d tool deltas %d", res.Text, res.Progress, res.ToolCallDeltas)
	}
	if res.Usage == nil || *res.Usage.InputTokens != 3 || *res.Usage.OutputTokens != 2 || res.Usage.CostUSD != nil {
		t.Errorf("usage = %+v", res.Usage)
	}
	if len(res.Logs) != 1 || res.Logs[0].Msg != "kept" {
		t.Errorf("logs = %+v", res.Logs)
	}
}

func TestEmitTextNoAllocs(t *testing.T) {
	h := sdktest.NewHost(t, sdktest.Options{})
	c := sdk.NewCall(nopHost{h})
	in := int64(1)
	u := abi.Usage{InputTokens: &in}
	if n := testing.AllocsPerRun(100, func() {
		c.EmitText("delta")
		c.EmitUsage(u)
	}); n != 0 {
		t.Errorf("EmitText+EmitUsage allocate %v times", n)
	}
}

// nopHost drops emits, to measure the SDK side alone.
type nopHost struct{ *sdktest.Host }

func (nopHost) Emit(abi.EmitKind, []byte) bool { return false }

func TestResponseError(t *testing.T) {
	for _, tc := range []struct {
		status     int
		retryAfter string
		want       sdk.Error
	}{
		{401, "", sdk.Error{Code: "PROVIDER_AUTH", Status: 401}},
		{403, "", sdk.Error{Code: "PROVIDER_AUTH", Status: 403}},
		{429, "7", sdk.Error{Code: "RATE_LIMITED", Status: 429, Retryable: true, RetryAfterMs: 7000}},
		{429, "Wed, 21 Oct 2015 07:28:00 GMT", sdk.Error{Code: "RATE_LIMITED", Status: 429, Retryable: true}},
		{400, "", sdk.Error{Code: "PROVIDER_ERROR", Status: 400}},
		{503, "", sdk.Error{Code: "PROVIDER_ERROR", Status: 503, Retryable: true}},
	} {
		got := sdk.ResponseError(&sdk.Response{Status: tc.status, Header: map[string]string{"retry-after": tc.retryAfter}})
		got.Message = ""
		if *got != tc.want {
			t.Errorf("status %d: %+v, want %+v", tc.status, *got, tc.want)
		}
	}
}

func TestRegisterOnce(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a second registration did not panic")
		}
	}()
	sdk.RegisterTools(toolSet{})
	sdk.RegisterProvider(providerFunc(nil))
}

func FuzzAppendUsage(f *testing.F) {
	f.Add(int64(0), int64(-1), int64(1<<62), 0.0, 1e-7, true)
	f.Add(int64(5), int64(0), int64(7), 1e21, 123.456, false)
	f.Fuzz(func(t *testing.T, a, b, c int64, x, y float64, some bool) {
		u := abi.Usage{InputTokens: &a, CostUSD: &x, APIEquivalentCostUSD: &y}
		if some {
			u.OutputTokens, u.CachedInputTokens, u.ReasoningTokens, u.CacheCreationInputTokens = &b, &c, &a, &b
		}
		got := sdk.AppendUsage(nil, &u)
		var back abi.Usage
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("AppendUsage = %s: %v", got, err)
		}
		want := u
		if x != x || x > 1.7976931348623157e308 || x < -1.7976931348623157e308 {
			want.CostUSD = nil
		}
		if y != y || y > 1.7976931348623157e308 || y < -1.7976931348623157e308 {
			want.APIEquivalentCostUSD = nil
		}
		wb, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if string(wb) != string(got) {
			t.Fatalf("AppendUsage = %s, encoding/json = %s", got, wb)
		}
	})
}

func contextCancelled(t *testing.T) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx, cancel
}
