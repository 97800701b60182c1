package vendorsim

import (
	"testing"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
	"adhost/sdk-plugin/sdktest"
)

// SDKRunner returns a Runner that runs p natively through sdktest the way
// the host runs the wasm build: the credential header of the simulated
// vendor is injected with c.APIKey (when set), and requests may reach only
// the simulator's origin.
func SDKRunner(p sdk.Provider) Runner {
	return func(t *testing.T, c *Call) []Event {
		t.Helper()
		opts := HostOptions(c.Server, c.APIKey)
		opts.Config = c.Settings
		switch c.Turn.Op {
		case OpInspect:
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
func HostOptions(s *Server, key string) sdktest.Options {
	opts := sdktest.Options{Origins: []string{s.URL()}}
	if key != "" {
		name, prefix := s.Vendor().Credential()
		opts.Headers = map[string]string{name: prefix + key}
	}
	return opts
}

// EventsOf converts streamed sdktest items to Events; items the host would
// drop (emitted after cancellation) are left out.
func EventsOf(items []sdktest.Item) []Event {
	var evs []Event
	for _, it := range items {
		if it.Dropped {
			continue
		}
		switch it.Kind {
		case abi.EmitText:
			evs = append(evs, Event{Text: it.Text})
		case abi.EmitProgress:
			evs = append(evs, Event{Progress: true})
		case abi.EmitToolCallDelta:
			evs = append(evs, Event{ToolCallDelta: true})
		case abi.EmitUsage:
			evs = append(evs, Event{Usage: it.Usage})
		}
	}
	return evs
}

func terminal(r *sdktest.Result, out *abi.CompleteOutput, insp *abi.InspectOutput) Event {
	switch r.Status {
	case abi.StatusOK:
		return Event{Output: out, Inspect: insp}
	case abi.StatusError:
		return Event{Error: r.Error}
	}
	return Event{Cancelled: true}
}
