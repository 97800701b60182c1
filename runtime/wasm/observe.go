package wasm

import (
	"sync/atomic"
	"time"

	"adhost/abi"
)

// Observer receives what the host's metrics count of every extension:
// each instance created (instantiate and _initialize) and each call with
// its outcome. It must be cheap and must not block: it runs on the call's
// goroutine. No argument carries content — the extension id is the
// operator's, the op an ABI name, the error's public code is all a
// recorder may keep.
type Observer interface {
	Instantiated(ext string, d time.Duration)
	Called(ext, op string, err error)
}

type observerBox struct{ o Observer }

// observer is process-wide: metrics are one registry per host process,
// and extensions are loaded (and reloaded) in several places that need
// not each be told.
var observer atomic.Pointer[observerBox]

// SetObserver installs o for every extension (nil: none). The host calls
// it once at start-up, before loading extensions.
func SetObserver(o Observer) {
	if o == nil {
		observer.Store(nil)
		return
	}
	observer.Store(&observerBox{o})
}

func observeInstance(x *Extension, start time.Time) {
	if b := observer.Load(); b != nil {
		b.o.Instantiated(x.pin.ID, time.Since(start))
	}
}

//go:noinline
func observeCall(x *Extension, op abi.Op, err error) {
	if b := observer.Load(); b != nil {
		b.o.Called(x.pin.ID, op.String(), err)
	}
}
