package jetstream

import "sync/atomic"

// Writes counts the messages this Store had the server store, by kind and
// by stream. With replicas 1 and every write synced each is one disk sync
// on its stream, and a stream syncs one write after another while
// different streams sync at once: the total is what a job or a session
// turn costs the server's disk, the busiest stream's share what bounds
// the throughput. The job benchmarks report them per job. Only writes the
// server acknowledged count (a refused compare-and-set stores nothing).
type Writes struct {
	KVCreate uint64 // Create of a durable key
	KVUpdate uint64 // Update (compare-and-set) of a durable key
	KVDelete uint64 // Delete of a durable key (a purge)
	Lease    uint64 // lease acquisitions, renewals and releases
	LogMsgs  uint64 // log messages: one per Append
	LogRecs  uint64 // the records in them
	// Reads are the read operations (Get, List, Read, Last and the
	// lease reads of Acquire, Renew and Release): they store nothing but
	// cost the server and the host CPU.
	Reads uint64
	// Streams are the writes of each stream: the KV shards, the lease
	// bucket, the log shards, in that order.
	Streams []uint64
}

// KV is the writes of durable keys.
func (w Writes) KV() uint64 { return w.KVCreate + w.KVUpdate + w.KVDelete }

// Total is every message stored.
func (w Writes) Total() uint64 { return w.KV() + w.Lease + w.LogMsgs }

// Busiest is the writes of the stream that had the most.
func (w Writes) Busiest() uint64 {
	var m uint64
	for _, n := range w.Streams {
		m = max(m, n)
	}
	return m
}

// Sub is w minus an earlier reading of the same store.
func (w Writes) Sub(o Writes) Writes { return w.combine(o, func(a, b uint64) uint64 { return a - b }) }

// Add is w plus another store's count (of the same layout).
func (w Writes) Add(o Writes) Writes { return w.combine(o, func(a, b uint64) uint64 { return a + b }) }

func (w Writes) combine(o Writes, f func(a, b uint64) uint64) Writes {
	out := Writes{KVCreate: f(w.KVCreate, o.KVCreate), KVUpdate: f(w.KVUpdate, o.KVUpdate), KVDelete: f(w.KVDelete, o.KVDelete),
		Lease: f(w.Lease, o.Lease), LogMsgs: f(w.LogMsgs, o.LogMsgs), LogRecs: f(w.LogRecs, o.LogRecs), Reads: f(w.Reads, o.Reads),
		Streams: make([]uint64, max(len(w.Streams), len(o.Streams)))}
	for i := range out.Streams {
		var a, b uint64
		if i < len(w.Streams) {
			a = w.Streams[i]
		}
		if i < len(o.Streams) {
			b = o.Streams[i]
		}
		out.Streams[i] = f(a, b)
	}
	return out
}

type writeCounts struct {
	kvCreate, kvUpdate, kvDelete, lease, logMsgs, logRecs, reads atomic.Uint64
}

// Writes returns the counts since Open.
func (s *Store) Writes() Writes {
	c := &s.writes
	w := Writes{KVCreate: c.kvCreate.Load(), KVUpdate: c.kvUpdate.Load(), KVDelete: c.kvDelete.Load(),
		Lease: c.lease.Load(), LogMsgs: c.logMsgs.Load(), LogRecs: c.logRecs.Load(), Reads: c.reads.Load()}
	for i := range s.kvs {
		w.Streams = append(w.Streams, s.kvs[i].writes.Load())
	}
	w.Streams = append(w.Streams, w.Lease)
	for i := range s.logs {
		w.Streams = append(w.Streams, s.logs[i].writes.Load())
	}
	return w
}
