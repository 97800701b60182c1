package wasm

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"adhost/abi"
	"adhost/runtime"
	"adhost/runtime/protocol"
	"adhost/runtime/wasm/checkpoint"
)

// Hostile hand-assembled providers beside a normal guest (issue 9): each
// runs against the host's limits while another extension serves, and the
// client sees the provider's failure, never the host's.

// hostileManifest is the manifest of a hand-assembled hostile provider.
func hostileManifest(id string) string {
	return `id = "` + id + `"
name = "Hostile"
version = "1.0.0"
kind = "provider"
contractVersion = "1.0"
vendor = "adhost"
authMode = "none"
usageSource = "adapter-report"

[capabilities]
tools = false
textStreaming = true

[limits]
memoryMiB = 16
computeMs = 5000
poolSize = 1
`
}

// besideNormal runs hostile's call while the normal guest serves calls
// of its own in a loop — started before the hostile call and still
// serving after it — and returns the hostile call's error.
func besideNormal(t *testing.T, good runtime.Provider, hostile func() error) error {
	t.Helper()
	stop := make(chan struct{})
	served := make(chan struct{}, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			out, err := good.Complete(t.Context(), input("stream:ok"), &sink{})
			if err != nil || out.Text != "ok" {
				t.Errorf("the normal extension beside a hostile one: %+v, %v", out, err)
				close(served)
				return
			}
			select {
			case served <- struct{}{}:
			default:
			}
		}
	})
	<-served // the normal extension is serving
	err := hostile()
	<-served // and still is
	<-served
	close(stop)
	wg.Wait()
	return err
}

func checkProviderFault(t *testing.T, err error, class string) {
	t.Helper()
	pe, ok := err.(*protocol.Error)
	if !ok || pe.Code != protocol.CodeProviderFailed || pe.Retryable || !strings.Contains(pe.Message, class) {
		t.Fatalf("hostile call: %#v, want PROVIDER_FAILED (not retryable) naming %q", err, class)
	}
	if protocol.HTTPStatus(pe.Code) != 502 {
		t.Fatalf("PROVIDER_FAILED status %d", protocol.HTTPStatus(pe.Code))
	}
}

// TestHostileRecursion: unbounded recursion, with frames fat with locals,
// stops at the checkpoint depth limit as a stack-limit fault; the instance
// is discarded and the host's RSS comes back.
func TestHostileRecursion(t *testing.T) {
	// func 4: (i32)->i32 with 64 i32 locals: local.get 0; call 4; end.
	recurse := asmFunc{typ: 1, code: []byte{1, 64, 0x7f, 0x20, 0, 0x10, 4, 0x0b}}
	pin := asmModule{
		manifest: hostileManifest("recurser"),
		attack:   []byte{0x20, 0, 0x10, 4, 0x1a}, // local.get 0; call 4; drop
		funcs:    []asmFunc{recurse},
	}.build(t)
	logs := &logBuf{}
	x, err := Load(t.Context(), pin, Options{Cache: sharedCache, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close(context.Background())
	p, err := x.Provider(InstanceConfig{ID: "recurser"})
	if err != nil {
		t.Fatal(err)
	}
	good := newProvider(t, loadProvider(t, Options{}), InstanceConfig{})
	base := baseRSS(t)
	for range 3 {
		err = besideNormal(t, good, func() error {
			_, err := p.Complete(t.Context(), input("x"), &sink{})
			return err
		})
		checkProviderFault(t, err, "stack limit")
	}
	x.pool.wg.Wait()
	if s := x.Stats(); s.Live != 1 || s.Idle != 1 {
		t.Fatalf("after the recursions: %+v (the trapped instances must be discarded and replaced)", s)
	}
	took, now := awaitRSS(t, base)
	t.Logf("RSS start %d MiB, %d MiB %v after three recursions", base>>20, now>>20, took)
	if !strings.Contains(logs.String(), "stack limit") {
		t.Errorf("the operator's log does not name the cause:\n%s", logs.String())
	}
}

// TestHostileTable: a table with no declared maximum grown by table.grow
// until refused stops at checkpoint.MaxTableEntries, costs the host
// little, and a table declared larger is refused at load.
func TestHostileTable(t *testing.T) {
	// Table section: one funcref table, min 1, no maximum.
	// func 4: ()->() loops table.grow(ref.null, 1) until it returns -1.
	growAll := asmFunc{typ: 0, code: []byte{0,
		0x03, 0x40, // loop
		0xd0, 0x70, 0x41, 0x01, 0xfc, 0x0f, 0x00, // ref.null func; i32.const 1; table.grow 0
		0x41, 0x7f, 0x47, 0x0d, 0x00, // i32.const -1; i32.ne; br_if 0
		0x0b, 0x0b}}
	// func 5: ()->() is the export "size" would need a result: use (i32)->i32
	// ignoring its argument: table.size 0.
	size := asmFunc{typ: 1, code: []byte{0, 0xfc, 0x10, 0x00, 0x0b}}
	pin := asmModule{
		manifest: hostileManifest("tabler"),
		attack:   []byte{0x10, 4}, // call growAll
		funcs:    []asmFunc{growAll, size},
		tables:   []byte{1, 0x70, 0x00, 0x01},
		exports:  map[string]byte{"size": 5},
	}.build(t)
	x, err := Load(t.Context(), pin, Options{Cache: sharedCache})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close(context.Background())
	p, err := x.Provider(InstanceConfig{ID: "tabler"})
	if err != nil {
		t.Fatal(err)
	}
	good := newProvider(t, loadProvider(t, Options{}), InstanceConfig{})
	base := baseRSS(t)
	err = besideNormal(t, good, func() error {
		_, err := p.Complete(t.Context(), input("x"), &sink{})
		return err
	})
	// The guest returns the error status without an error output: a
	// broken result, not a host fault.
	if protocol.CodeOf(err) != protocol.CodeInvalidProviderResult {
		t.Fatalf("table grower: %v, want INVALID_PROVIDER_RESULT", err)
	}
	// Grown to the bound on a fresh instance, the table stops there.
	inst, l, err := x.pool.acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer x.pool.release(t.Context(), inst, l, true)
	if _, err := inst.mod.ExportedFunction("plugin_call").Call(t.Context(), uint64(abi.OpComplete)); err != nil {
		t.Fatal(err)
	}
	got, err := inst.mod.ExportedFunction("size").Call(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != checkpoint.MaxTableEntries {
		t.Fatalf("table size after growing until refused: %d, want %d", got[0], checkpoint.MaxTableEntries)
	}
	if now := rss(t); now-base > rssSlack {
		t.Errorf("RSS %d MiB over a start of %d MiB with a table at its bound", now>>20, base>>20)
	}

	// A table declared over the bound never loads.
	big := asmModule{manifest: hostileManifest("bigtable"), attack: []byte{}, tables: append([]byte{1, 0x70, 0x00}, uleb(nil, 100_000_000)...)}.build(t)
	if _, err := Load(t.Context(), big, Options{Cache: sharedCache}); err == nil || !strings.Contains(err.Error(), "entries") {
		t.Fatalf("a 100M-entry table: %v, want a refusal at load", err)
	}
}

// TestHostileSpinBesideNormal: a guest spinning without calling the host
// is stopped by the watchdog as a compute-limit fault while another
// extension serves.
func TestHostileSpinBesideNormal(t *testing.T) {
	pin := asmModule{manifest: hostileManifest("spinner2"), attack: []byte{0x03, 0x40, 0x0c, 0x00, 0x0b}}.build(t) // loop br 0 end
	x, err := Load(t.Context(), pin, Options{Cache: sharedCache, ComputeLimit: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close(context.Background())
	p, err := x.Provider(InstanceConfig{ID: "spinner2"})
	if err != nil {
		t.Fatal(err)
	}
	good := newProvider(t, loadProvider(t, Options{}), InstanceConfig{})
	err = besideNormal(t, good, func() error {
		_, err := p.Complete(t.Context(), input("x"), &sink{})
		return err
	})
	checkProviderFault(t, err, "compute limit")
}
