package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"adhost/abi"
	"adhost/runtime/protocol"
)

// scriptProvider turns fuzz bytes into provider behaviour: streamed text,
// empty deltas, progress, usage, tool calls (valid and not), errors,
// contract violations and cancellation, one byte per action.
type scriptProvider struct {
	mu     sync.Mutex
	script []byte
	pos    int
	run    *Run
	ready  chan struct{}
}

func (s *scriptProvider) next() (byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pos >= len(s.script) {
		return 0, false
	}
	b := s.script[s.pos]
	s.pos++
	return b, true
}

func (s *scriptProvider) Inspect(context.Context) (*abi.InspectOutput, error) { return nil, nil }

func (s *scriptProvider) Complete(ctx context.Context, in *abi.CompleteInput, sink TurnSink) (*abi.CompleteOutput, error) {
	<-s.ready
	var text strings.Builder
	for {
		b, ok := s.next()
		if !ok {
			return &abi.CompleteOutput{Text: text.String()}, nil
		}
		switch b % 12 {
		case 0:
			sink.Text("a\n")
			text.WriteString("a\n")
		case 1:
			sink.Text("")
		case 2:
			sink.Progress()
		case 3:
			v := int64(b)
			sink.Usage(abi.Usage{InputTokens: &v})
		case 4:
			return &abi.CompleteOutput{Text: text.String(), FinishReason: "length"}, nil
		case 5, 6:
			n := int(b/12)%3 + 1
			calls := make([]abi.ToolCall, n)
			for i := range calls {
				calls[i] = abi.ToolCall{ID: fmt.Sprintf("c%d-%d", in.Step, i), Name: "conformance_lookup", Arguments: json.RawMessage(`{"value":1}`)}
			}
			return &abi.CompleteOutput{Text: text.String(), ToolCalls: calls}, nil
		case 7:
			return &abi.CompleteOutput{Text: text.String(), ToolCalls: []abi.ToolCall{{ID: "", Name: "conformance_lookup"}}}, nil
		case 8:
			return nil, protocol.New(protocol.CodeProviderError)
		case 9:
			return &abi.CompleteOutput{Text: text.String() + "x"}, nil // stream mismatch unless nothing streamed
		case 10:
			s.run.Cancel(nil)
		case 11:
			u := int64(-1)
			return &abi.CompleteOutput{Text: text.String(), Usage: &abi.Usage{OutputTokens: &u}}, nil
		}
	}
}

// FuzzRunGrammar checks that whatever a provider does, the stream keeps
// the envelope and ordering invariants of wire-core §5.3.
func FuzzRunGrammar(f *testing.F) {
	for _, seed := range []string{"", "\x00\x00", "\x05\x00\x04", "\x02\x02\x03\x00\x06\x00", "\x07", "\x08", "\x09", "\x00\x0a", "\x05\x05\x05\x0b", "\x00\x01\x02\x03\x05\x00\x01\x02\x03"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) > 256 {
			script = script[:256]
		}
		prov := &scriptProvider{script: script, ready: make(chan struct{})}
		env := newEnv(t, &fakeProvider{complete: prov.Complete}, func(o *Options, _ *ProviderInstance) { o.UsageSink = nil })
		run := env.start(t, req("x", withTools("conformance_lookup")), ModeStream)
		prov.run = run
		close(prov.ready)
		evs := checkStream(t, collect(t, run), "p", "m")
		last := terminalOf(evs)
		if last.typ() == EventRunCancelled && codeOf(last) != "CANCELLED" {
			t.Fatalf("cancelled with %s", codeOf(last))
		}
	})
}
