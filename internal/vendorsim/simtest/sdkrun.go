package simtest

import (
	"testing"

	"adhost/abi"
	"adhost/internal/vendorsim"
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
