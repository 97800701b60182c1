package wasm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash/maphash"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/api"

	"adhost/abi"
	"adhost/runtime/durable"
)

// kvSpace is the kv namespace of one tool binding: the extension's keys in
// the host's store, one sub-namespace per subject. Keys in the store are
//
//	kv/<extension id>/<sha256 hex of the subject>/<hex of the guest's key>
//
// so that every guest key, whatever its bytes, is a valid durable key, a
// subject's keys share a prefix (listing them is one List), and no
// subject string reaches the store.
type kvSpace struct {
	store durable.KV
	ext   string
}

// kvLocks serialise the writes of one (extension, subject): a put checks
// the subject's bounds and then writes, and two puts of the same subject
// (a subject may run several runs at once) must not both pass the check.
// The revision checks of the store keep a write from overwriting another
// one it did not see; the lock keeps the bounds exact within this host.
var (
	kvLocks    [64]sync.Mutex
	kvLockSeed = maphash.MakeSeed()
)

func kvLock(prefix string) *sync.Mutex {
	return &kvLocks[maphash.String(kvLockSeed, prefix)%uint64(len(kvLocks))]
}

// subjectPrefix is the store prefix of a subject's keys (ending in '/').
func (s *kvSpace) subjectPrefix(subject string) string {
	sum := sha256.Sum256([]byte(subject))
	return "kv/" + s.ext + "/" + hex.EncodeToString(sum[:]) + "/"
}

// checkKVKey refuses keys the ABI does not allow.
func checkKVKey(key []byte) abi.Errno {
	if len(key) == 0 || len(key) > abi.MaxKVKeyBytes || !utf8.Valid(key) {
		return abi.ErrBadRequest
	}
	return 0
}

// storeErrno maps a store error to the guest's errno.
func (cs *callState) storeErrno(err error) abi.Errno {
	switch {
	case cs.ctx.Err() != nil:
		return abi.ErrCancelled
	case errors.Is(err, durable.ErrNotFound):
		return abi.ErrNotFound
	case errors.Is(err, durable.ErrTooLarge):
		return abi.ErrLimit
	}
	cs.x.log.Warn("extension kv store failure", "err", err)
	return abi.ErrStore
}

// kvReady returns the space and the subject's prefix, or the errno of a
// call that may not use kv now.
func (cs *callState) kvReady() (*kvSpace, string, abi.Errno) {
	if cs.kv == nil || cs.subject == "" {
		return nil, "", abi.ErrDenied
	}
	if cs.cancelled() {
		return nil, "", abi.ErrCancelled
	}
	return cs.kv, cs.kv.subjectPrefix(cs.subject), 0
}

func hostKVGet(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	key := guestBytes(cs, mod, uint32(stack[0]), uint32(stack[1]))
	buf, capacity := uint32(stack[2]), uint32(stack[3])
	if capacity > 0 {
		guestBytes(cs, mod, buf, capacity) // trap on a bad buffer before any work
	}
	kv, prefix, e := cs.kvReady()
	if e == 0 {
		e = checkKVKey(key)
	}
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	cs.enterWait()
	ent, err := kv.store.Get(cs.ctx, prefix+hex.EncodeToString(key))
	cs.exitWait(true)
	if err != nil {
		stack[0] = errno(cs.storeErrno(err))
		return
	}
	stack[0] = copyOut(cs, mod, buf, capacity, ent.Value)
}

func hostKVPut(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	key := guestBytes(cs, mod, uint32(stack[0]), uint32(stack[1]))
	val := guestBytes(cs, mod, uint32(stack[2]), uint32(stack[3]))
	kv, prefix, e := cs.kvReady()
	if e == 0 {
		e = checkKVKey(key)
	}
	if e == 0 && len(val) > abi.MaxKVValueBytes {
		e = abi.ErrLimit
	}
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	cs.enterWait()
	e = kv.put(cs, prefix, hex.EncodeToString(key), len(key), append([]byte(nil), val...))
	cs.exitWait(true)
	stack[0] = errno(e)
}

// put stores one value within the subject's bounds.
func (s *kvSpace) put(cs *callState, prefix, hexKey string, keyLen int, val []byte) abi.Errno {
	mu := kvLock(prefix)
	mu.Lock()
	defer mu.Unlock()
	ents, err := s.store.List(cs.ctx, prefix, "", abi.MaxKVKeys+1)
	if err != nil {
		return cs.storeErrno(err)
	}
	keys, size := 1, keyLen+len(val)
	var rev uint64
	for _, ent := range ents {
		if ent.Key == prefix+hexKey {
			rev = ent.Revision
			continue
		}
		keys++
		size += len(ent.Key[len(prefix):])/2 + len(ent.Value)
	}
	if keys > abi.MaxKVKeys || size > abi.MaxKVSubjectBytes {
		return abi.ErrLimit
	}
	if rev == 0 {
		_, err = s.store.Create(cs.ctx, prefix+hexKey, val)
	} else {
		_, err = s.store.Update(cs.ctx, prefix+hexKey, val, rev)
	}
	if err != nil {
		return cs.storeErrno(err)
	}
	return 0
}

func hostKVDelete(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	key := guestBytes(cs, mod, uint32(stack[0]), uint32(stack[1]))
	kv, prefix, e := cs.kvReady()
	if e == 0 {
		e = checkKVKey(key)
	}
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	cs.enterWait()
	defer cs.exitWait(true)
	mu := kvLock(prefix)
	mu.Lock()
	defer mu.Unlock()
	k := prefix + hex.EncodeToString(key)
	if _, err := kv.store.Get(cs.ctx, k); err != nil {
		stack[0] = errno(cs.storeErrno(err))
		return
	}
	if err := kv.store.Delete(cs.ctx, k, 0); err != nil {
		stack[0] = errno(cs.storeErrno(err))
		return
	}
	stack[0] = 0
}

func hostKVList(ctx context.Context, mod api.Module, stack []uint64) {
	cs := current(ctx)
	buf, capacity := uint32(stack[0]), uint32(stack[1])
	if capacity > 0 {
		guestBytes(cs, mod, buf, capacity)
	}
	kv, prefix, e := cs.kvReady()
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	cs.enterWait()
	ents, err := kv.store.List(cs.ctx, prefix, "", abi.MaxKVKeys)
	cs.exitWait(true)
	if err != nil {
		stack[0] = errno(cs.storeErrno(err))
		return
	}
	keys := make([]string, 0, len(ents))
	for _, ent := range ents {
		k, err := hex.DecodeString(strings.TrimPrefix(ent.Key, prefix))
		if err != nil {
			continue // not written by put
		}
		keys = append(keys, string(k))
	}
	out, _ := json.Marshal(keys) // hex order is byte order of the keys
	stack[0] = copyOut(cs, mod, buf, capacity, out)
}
