package wasm

import (
	"context"
	goruntime "runtime"
	"sync"
	"unsafe"

	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

// withLinearMemory returns ctx with an allocator that backs the linear
// memory of the instance being created by a reservation (reservedMemory)
// instead of wazero's default, a Go slice grown by copying. Pass it to
// InstantiateModule.
//
// With wazero's default every memory.grow past the slice's capacity copies
// the whole memory into a bigger slice, and the old copies stay on the Go
// heap until a collection and then the scavenger give them back: a guest
// allocating to its 64 MiB cap left the host 700 MB bigger for longer than
// 10 s. A reservation never copies, never moves and is unmapped at close.
func (inst *instance) withLinearMemory(ctx context.Context) context.Context {
	return experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(
		func(_, max uint64) experimental.LinearMemory { return reserveMemory(inst, max) }))
}

// reservedMemory is a linear memory backed by one anonymous mapping of the
// memory's maximum (the manifest's memoryMiB unless the module declares
// less; wazero refuses a module declaring more). The mapping starts
// PROT_NONE, which costs address space only; Reallocate makes a prefix
// readable and writable with mprotect, so growing copies nothing and the
// base never moves, and an access past the committed prefix faults instead
// of reading another allocation. Pages count towards RSS only once the
// guest touches them.
//
// The kernel charges committed pages (not the reservation) against the
// overcommit limit at mprotect time, so under vm.overcommit_memory=2 a
// grow that does not fit fails cleanly (memory.grow returns -1) instead of
// the host being killed later. Each instance costs at most two map entries
// (the committed prefix and the rest), far below vm.max_map_count (65530
// by default) even at manifest.MaxPoolSize instances of every extension;
// the address space of manifest.MaxMemoryMiB (1 GiB) per instance is
// negligible against 128 TiB, but counts against RLIMIT_AS (ulimit -v),
// which an operator must then size for the pools.
//
// Free releases the memory at once. When the instance is not in a call it
// unmaps it. During a call (the guest called proc_exit, which closes the
// module from inside the call, or the runtime was closed under a running
// guest) the guest's compiled code may still hold the base address, so
// Free only drops the pages (MADV_DONTNEED: the RSS goes back to the OS
// immediately, a late access reads zeros instead of faulting) and the
// address range is unmapped by a cleanup once the instance is unreachable.
// The same cleanup unmaps a memory whose module was never closed (wazero
// does not close a module whose instantiation failed).
//
// Unmapping at once relies on no call starting on a closed module: wazero
// does not check (without WithCloseOnContextDone), and with its default
// memory such a call would run on the old slice instead of faulting. Only
// Extension.Close gives up on calls in flight; a call that had taken an
// instance but not yet entered run would then fault. run refusing a
// closed module after it sets cur closes that gap (Go's atomics are
// sequentially consistent: either Free sees cur or run sees the close).
type reservedMemory struct {
	inst *instance // whose call, if any, may still touch the memory

	mu        sync.Mutex
	m         mapping
	committed uintptr // readable and writable prefix of m
	cleanup   goruntime.Cleanup
	freed     bool
}

// mapping is an anonymous mapping; it is the cleanup's argument, so it
// must not reach the instance.
type mapping struct {
	base unsafe.Pointer
	size uintptr
}

func (m mapping) bytes(n uintptr) []byte { return unsafe.Slice((*byte)(m.base), n) }

func (m mapping) unmap() {
	if m.size > 0 {
		_ = unix.MunmapPtr(m.base, m.size)
	}
}

// reserveMemory reserves max bytes for inst's linear memory. If the kernel
// refuses the reservation (address space exhausted, RLIMIT_AS) the memory
// falls back to a Go slice grown by copying, wazero's own behaviour:
// Allocate has no way to fail, and a failed instantiation is worse than a
// memory that costs more.
func reserveMemory(inst *instance, max uint64) experimental.LinearMemory {
	size := roundUp(uintptr(max), uintptr(unix.Getpagesize()))
	if size == 0 || uint64(size) != max {
		// A memory of no pages, one too big for a 32-bit address space,
		// or one the kernel's page size does not divide (a kernel with
		// pages above 64 KiB).
		return &heapMemory{max: max}
	}
	base, err := unix.MmapPtr(-1, 0, nil, size, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return &heapMemory{max: max}
	}
	r := &reservedMemory{inst: inst, m: mapping{base: base, size: size}}
	if inst != nil {
		r.cleanup = goruntime.AddCleanup(inst, mapping.unmap, r.m)
	}
	return r
}

// Reallocate implements experimental.LinearMemory: it commits the first
// size bytes and returns them, over the same base as every earlier result.
// It returns nil (memory.grow then returns -1) past the reservation or
// when the kernel refuses to commit.
func (r *reservedMemory) Reallocate(size uint64) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.freed || size > uint64(r.m.size) {
		return nil
	}
	n := uintptr(size)
	if n > r.committed {
		// wazero asks for whole 64 KiB pages, which the kernel page size
		// divides (reserveMemory checked it on the maximum).
		if err := unix.Mprotect(r.m.bytes(n)[r.committed:], unix.PROT_READ|unix.PROT_WRITE); err != nil {
			return nil
		}
		r.committed = n
	}
	if n == 0 {
		return []byte{}
	}
	return r.m.bytes(n)
}

// Free implements experimental.LinearMemory. wazero calls it once, when
// the module is closed.
func (r *reservedMemory) Free() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.freed {
		return
	}
	r.freed = true
	if r.inst == nil || r.inst.cur.Load() == nil {
		r.cleanup.Stop()
		r.m.unmap()
		r.m = mapping{}
		return
	}
	if r.committed > 0 {
		_ = unix.Madvise(r.m.bytes(r.committed), unix.MADV_DONTNEED)
	}
}

func roundUp(n, to uintptr) uintptr { return (n + to - 1) &^ (to - 1) }

// heapMemory is a linear memory in a Go slice grown by copying, like
// wazero's default; reserveMemory falls back to it.
type heapMemory struct {
	buf []byte
	max uint64
}

func (h *heapMemory) Reallocate(size uint64) []byte {
	if size > h.max {
		return nil
	}
	if size > uint64(cap(h.buf)) {
		b := make([]byte, size)
		copy(b, h.buf)
		h.buf = b
	}
	h.buf = h.buf[:size]
	return h.buf
}

func (h *heapMemory) Free() { h.buf = nil }
