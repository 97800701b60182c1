package simtest

import (
	"encoding/json"
	"net/url"
	"testing"

	"adhost/abi"
	"adhost/internal/vendorsim"
	"adhost/runtime/manifest"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/sdktest"
)

// SDKRunner returns a Runner that runs p natively through sdktest the way
// the host runs the wasm build: the credential header of the simulated
// vendor is injected with c.APIKey (when set), and requests may reach only
// the simulator's origin.
func SDKRunner(p sdk.Provider) Runner {
	return func(t *testing.T, c *Call) []vendorsim.Event {
		t.Helper()
		opts := HostOptions(c.Server, c.APIKey)
		opts.Config = c.Settings
		switch c.Turn.Op {
		case vendorsim.OpInspect:
			res := sdktest.Inspect(t, p, opts)
			return append(EventsOf(res.Items), terminal(&res.Result, nil, res.Output))
		default:
			res := sdktest.Complete(t, p, c.Turn.Input, opts)
			return append(EventsOf(res.Items), terminal(&res.Result, res.Output, nil))
		}
	}
}

// HostOptions are sdktest options that behave like the host in front of s:
// the vendor's credential header carries key (none when key is empty) and
// only s's origin is reachable.
func HostOptions(s *vendorsim.Server, key string) sdktest.Options {
	opts := sdktest.Options{Origins: []string{s.URL()}}
	if key != "" {
		name, prefix := s.Vendor().Credential()
		opts.Headers = map[string]string{name: prefix + key}
	}
	return opts
}

// EventsOf converts streamed sdktest items to transcript Events; items the
// host would drop (emitted after cancellation) are left out.
func EventsOf(items []sdktest.Item) []vendorsim.Event {
	var evs []vendorsim.Event
	for _, it := range items {
		if it.Dropped {
			continue
		}
		switch it.Kind {
		case abi.EmitText:
			evs = append(evs, vendorsim.Event{Text: it.Text})
		case abi.EmitProgress:
			evs = append(evs, vendorsim.Event{Progress: true})
		case abi.EmitToolCallDelta:
			evs = append(evs, vendorsim.Event{ToolCallDelta: true})
		case abi.EmitUsage:
			evs = append(evs, vendorsim.Event{Usage: it.Usage})
		}
	}
	return evs
}

func terminal(r *sdktest.Result, out *abi.CompleteOutput, insp *abi.InspectOutput) vendorsim.Event {
	switch r.Status {
	case abi.StatusOK:
		return vendorsim.Event{Output: out, Inspect: insp}
	case abi.StatusError:
		return vendorsim.Event{Error: r.Error}
	}
	return vendorsim.Event{Cancelled: true}
}

// ManifestRunner is SDKRunner with the fake host set up from the adapter's
// manifest m, as the host sets up the wasm build (ManifestHostOptions).
func ManifestRunner(p sdk.Provider, m *manifest.Manifest) Runner {
	return func(t *testing.T, c *Call) []vendorsim.Event {
		t.Helper()
		opts := ManifestHostOptions(m, c.Settings, c.APIKey)
		switch c.Turn.Op {
		case vendorsim.OpInspect:
			res := sdktest.Inspect(t, p, opts)
			return append(EventsOf(res.Items), terminal(&res.Result, nil, res.Output))
		default:
			res := sdktest.Complete(t, p, c.Turn.Input, opts)
			return append(EventsOf(res.Items), terminal(&res.Result, res.Output, nil))
		}
	}
}

// ManifestHostOptions are sdktest options for an instance with settings,
// set up as the host sets up the wasm build from its manifest m: the
// manifest's static headers, its credential slots filled with key, and as
// reachable origins the declared ones plus the configured endpoint's (when
// settings.endpoint passes sdk.CheckEndpoint).
func ManifestHostOptions(m *manifest.Manifest, settings []byte, key string) sdktest.Options {
	headers := map[string]string{}
	for k, v := range m.Network.Headers {
		headers[k] = v
	}
	for _, c := range m.Credentials {
		headers[c.Header] = c.Prefix + key
	}
	origins := append([]string(nil), m.Network.Origins...)
	var s struct {
		Endpoint string `json:"endpoint"`
	}
	if json.Unmarshal(settings, &s) == nil && s.Endpoint != "" {
		if ep, err := sdk.CheckEndpoint(s.Endpoint); err == nil {
			if u, err := url.Parse(ep); err == nil {
				origins = append(origins, u.Scheme+"://"+u.Host)
			}
		}
	}
	return sdktest.Options{Config: settings, Headers: headers, Origins: origins}
}
