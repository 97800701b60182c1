package sdk

import (
	"encoding/json"

	"adhost/abi"
)

// KVHost is the kv part of the host functions (abi.HostKVGet …), served
// to tool extensions whose manifest sets kv = true. It is separate from
// Host so that a module that never uses kv does not import it (the host
// refuses the imports to any other module); the wasm host implements it,
// and a test host may.
type KVHost interface {
	// KVGet copies the key's value into buf (buffer rule) and returns its
	// length, or a negative abi.Errno (abi.ErrNotFound when absent).
	KVGet(key, buf []byte) int32
	// KVPut stores a value: 0, or a negative abi.Errno.
	KVPut(key, val []byte) int32
	// KVDelete removes a key: 0, or a negative abi.Errno
	// (abi.ErrNotFound when it was absent).
	KVDelete(key []byte) int32
	// KVList copies the JSON array of keys into buf (buffer rule).
	KVList(buf []byte) int32
}

// KV returns the call's kv namespace: the run's subject's keys of this
// extension (the host chooses the subject). Without kv (a host that does
// not serve it) every operation fails with abi.ErrDenied.
func (c *Call) KV() KV {
	kh, _ := c.h.(KVHost)
	return KV{h: kh}
}

// KV is a tool call's kv namespace (see Call.KV). Errors are *HTTPError
// values carrying the host's abi.Errno (the type the SDK uses for every
// host errno).
type KV struct{ h KVHost }

func kvErr(n int32) error { return &HTTPError{Errno: abi.Errno(n)} }

// Get returns the key's value; found is false when the key is absent.
func (k KV) Get(key string) (val []byte, found bool, err error) {
	if k.h == nil {
		return nil, false, kvErr(int32(abi.ErrDenied))
	}
	buf := make([]byte, 256)
	for {
		n := k.h.KVGet([]byte(key), buf)
		switch {
		case n == int32(abi.ErrNotFound):
			return nil, false, nil
		case n < 0:
			return nil, false, kvErr(n)
		case int(n) > len(buf):
			buf = make([]byte, n)
			continue
		}
		return buf[:n], true, nil
	}
}

// Put stores val under key. abi.ErrLimit: a bound of the subject's
// namespace would be passed (nothing changed).
func (k KV) Put(key string, val []byte) error {
	if k.h == nil {
		return kvErr(int32(abi.ErrDenied))
	}
	if n := k.h.KVPut([]byte(key), val); n != 0 {
		return kvErr(n)
	}
	return nil
}

// Delete removes key and reports whether it was there.
func (k KV) Delete(key string) (existed bool, err error) {
	if k.h == nil {
		return false, kvErr(int32(abi.ErrDenied))
	}
	switch n := k.h.KVDelete([]byte(key)); {
	case n == 0:
		return true, nil
	case n == int32(abi.ErrNotFound):
		return false, nil
	default:
		return false, kvErr(n)
	}
}

// List returns the subject's keys in byte order.
func (k KV) List() ([]string, error) {
	if k.h == nil {
		return nil, kvErr(int32(abi.ErrDenied))
	}
	buf := make([]byte, 1024)
	for {
		n := k.h.KVList(buf)
		if n < 0 {
			return nil, kvErr(n)
		}
		if int(n) > len(buf) {
			buf = make([]byte, n)
			continue
		}
		var keys []string
		if err := json.Unmarshal(buf[:n], &keys); err != nil {
			return nil, kvErr(int32(abi.ErrBadRequest))
		}
		return keys, nil
	}
}
