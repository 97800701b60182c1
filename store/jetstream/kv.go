package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"adhost/runtime/durable"
)

// KV: one key per durable key (encodeKey) in the KV bucket its hash
// names (kvShardOf); a revision is that bucket stream's sequence of the
// key's last write, so it grows with every write of the key, across delete
// and re-create. Revisions of keys in different shards are unrelated, as
// durable.KV allows: they are only ever compared for one key.

// kvShardOf is the shard holding an encoded key: FNV-1a of it, so every
// host puts a key in the same bucket.
func (s *Store) kvShardOf(enc string) *kvShard {
	h := fnv.New32a()
	h.Write([]byte(enc))
	return &s.kvs[h.Sum32()%uint32(kvShards)]
}

func (s *Store) Get(ctx context.Context, key string) (durable.Entry, error) {
	s.writes.reads.Add(1)
	ctx, cancel, err := s.op(ctx, key)
	if err != nil {
		return durable.Entry{}, err
	}
	defer cancel()
	enc := encodeKey(key)
	e, err := s.kvShardOf(enc).kv.Get(ctx, enc)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return durable.Entry{}, durable.ErrNotFound
	}
	if err != nil {
		return durable.Entry{}, s.fail(err)
	}
	return durable.Entry{Key: key, Value: e.Value(), Revision: e.Revision()}, nil
}

func (s *Store) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	ctx, cancel, err := s.op(ctx, key)
	if err != nil {
		return 0, err
	}
	defer cancel()
	enc := encodeKey(key)
	sh := s.kvShardOf(enc)
	rev, err := sh.kv.Create(ctx, enc, value)
	if err != nil {
		if wrongLast(err) {
			return 0, durable.ErrExists
		}
		return 0, s.fail(err)
	}
	s.writes.kvCreate.Add(1)
	sh.writes.Add(1)
	return rev, nil
}

func (s *Store) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	ctx, cancel, err := s.op(ctx, key)
	if err != nil {
		return 0, err
	}
	defer cancel()
	if rev == 0 {
		// JetStream reads 0 as "absent"; durable revisions are positive.
		return 0, durable.ErrRevision
	}
	enc := encodeKey(key)
	sh := s.kvShardOf(enc)
	n, err := sh.kv.Update(ctx, enc, value, rev)
	if err != nil {
		if wrongLast(err) {
			return 0, durable.ErrRevision
		}
		return 0, s.fail(err)
	}
	s.writes.kvUpdate.Add(1)
	sh.writes.Add(1)
	return n, nil
}

func (s *Store) Delete(ctx context.Context, key string, rev uint64) error {
	ctx, cancel, err := s.op(ctx, key)
	if err != nil {
		return err
	}
	defer cancel()
	var opts []jetstream.KVDeleteOpt
	if rev != 0 {
		opts = append(opts, jetstream.LastRevision(rev))
	}
	enc := encodeKey(key)
	sh := s.kvShardOf(enc)
	kv := sh.kv
	del := kv.Delete
	if s.markerTTL > 0 {
		// A purge whose marker expires: deleted keys leave nothing
		// behind for List to walk once the marker is gone.
		opts = append(opts, jetstream.PurgeTTL(s.markerTTL))
		del = kv.Purge
	}
	if err := del(ctx, enc, opts...); err != nil {
		if wrongLast(err) {
			return durable.ErrRevision
		}
		return s.fail(err)
	}
	s.writes.kvDelete.Add(1)
	sh.writes.Add(1)
	return nil
}

// List reads the current value of every key under the prefix's complete
// levels from every shard at once, each in one batched direct get (or,
// with replicas, one leader read per key), then filters, sorts and cuts
// client-side: JetStream keeps keys in write order, not key order, so a
// page costs the whole prefix.
func (s *Store) List(ctx context.Context, prefix, after string, limit int) ([]durable.Entry, error) {
	s.writes.reads.Add(1)
	if s.closed.Load() {
		return nil, durable.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var (
		parts = make([][]durable.Entry, kvShards)
		errs  = make([]error, kvShards)
		wg    sync.WaitGroup
	)
	for i := range s.kvs {
		wg.Go(func() { parts[i], errs[i] = s.listShard(ctx, &s.kvs[i], prefix, after) })
	}
	wg.Wait()
	var out []durable.Entry
	for i := range parts {
		if errs[i] != nil {
			return nil, s.fail(errs[i])
		}
		out = append(out, parts[i]...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// listShard is List's read of one shard, unsorted.
func (s *Store) listShard(ctx context.Context, sh *kvShard, prefix, after string) ([]durable.Entry, error) {
	var out []durable.Entry
	add := func(subject string, rev uint64, value []byte, op string) {
		if op == "DEL" || op == "PURGE" {
			return
		}
		k, err := decodeKey(strings.TrimPrefix(subject, sh.subj))
		if err != nil || !strings.HasPrefix(k, prefix) || k <= after {
			return
		}
		out = append(out, durable.Entry{Key: k, Value: value, Revision: rev})
	}
	filter := sh.subj + listFilter(prefix)
	if s.direct {
		err := s.scan(ctx, sh.stream, filter, 1, func(m rawMsg) bool {
			add(m.subject, m.seq, m.data, m.header.Get("KV-Operation"))
			return true
		})
		return out, err
	}
	st, err := s.js.Stream(ctx, sh.stream)
	if err != nil {
		return nil, err
	}
	for seq := uint64(1); ; {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		add(m.Subject, m.Sequence, m.Data, m.Header.Get("KV-Operation"))
		seq = m.Sequence + 1
	}
}

// Leases: one key of the lease bucket per lease, its value the holder,
// the fencing token and the expiry. The token of an acquisition is the
// revision of the acquiring write itself (a Create of an absent record,
// or a compare-and-set over the current one): it cannot be known before
// the write, so the acquiring record stores token 0, read as "this
// record's revision", and a renewal writes it explicitly. Revisions are
// the bucket stream's sequences, so every acquisition's token is larger
// than any earlier one of the name, and an acquisition is one write.
//
// Expiry is compared with the acquiring host's clock: hosts sharing a
// store need clocks within a small fraction of the lease.

type leaseValue struct {
	Owner   string `json:"o,omitempty"`
	Token   uint64 `json:"t"`
	Expires int64  `json:"x,omitempty"` // Unix ns
}

func (v leaseValue) lease(name string) durable.Lease {
	l := durable.Lease{Name: name, Owner: v.Owner, Token: v.Token}
	if v.Expires != 0 {
		l.Expires = time.Unix(0, v.Expires)
	}
	return l
}

// maxLeaseRaces bounds the retries of a lease operation that lost a
// compare-and-set to a concurrent one.
const maxLeaseRaces = 16

func (s *Store) readLease(ctx context.Context, k string) (leaseValue, uint64, error) {
	s.writes.reads.Add(1)
	e, err := s.leases.Get(ctx, k)
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			return leaseValue{}, 0, durable.ErrNotFound
		}
		return leaseValue{}, 0, s.fail(err)
	}
	var v leaseValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return leaseValue{}, 0, errors.New("jetstream: lease record not written by this backend")
	}
	if v.Owner != "" && v.Token == 0 {
		v.Token = e.Revision() // written by the acquisition: its own revision
	}
	return v, e.Revision(), nil
}

func (s *Store) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (durable.Lease, error) {
	ctx, cancel, err := s.op(ctx, name)
	if err != nil {
		return durable.Lease{}, err
	}
	defer cancel()
	k := encodeKey(name)
	for range maxLeaseRaces {
		v, rev, err := s.readLease(ctx, k)
		absent := errors.Is(err, durable.ErrNotFound)
		if err != nil && !absent {
			return durable.Lease{}, err
		}
		now := s.o.Now()
		if !absent && v.Owner != "" && v.Owner != owner && now.UnixNano() < v.Expires {
			return v.lease(name), durable.ErrHeld
		}
		nv := leaseValue{Owner: owner, Expires: now.Add(ttl).UnixNano()}
		b, _ := json.Marshal(nv)
		if absent {
			nv.Token, err = s.leases.Create(ctx, k, b)
		} else {
			nv.Token, err = s.leases.Update(ctx, k, b, rev)
		}
		if err != nil {
			if wrongLast(err) {
				continue
			}
			return durable.Lease{}, s.fail(err)
		}
		s.writes.lease.Add(1)
		return nv.lease(name), nil
	}
	return durable.Lease{}, errors.New("jetstream: lease contended")
}

// change rewrites the lease held with token, or ErrFenced.
func (s *Store) change(ctx context.Context, name string, token uint64, next func(leaseValue) leaseValue) (durable.Lease, error) {
	ctx, cancel, err := s.op(ctx, name)
	if err != nil {
		return durable.Lease{}, err
	}
	defer cancel()
	k := encodeKey(name)
	for range maxLeaseRaces {
		v, rev, err := s.readLease(ctx, k)
		if errors.Is(err, durable.ErrNotFound) {
			return durable.Lease{}, durable.ErrFenced
		}
		if err != nil {
			return durable.Lease{}, err
		}
		if v.Token != token || v.Owner == "" {
			return durable.Lease{}, durable.ErrFenced
		}
		nv := next(v)
		b, _ := json.Marshal(nv)
		if _, err := s.leases.Update(ctx, k, b, rev); err != nil {
			if wrongLast(err) {
				continue // someone wrote: read again, maybe fenced
			}
			return durable.Lease{}, s.fail(err)
		}
		s.writes.lease.Add(1)
		return nv.lease(name), nil
	}
	return durable.Lease{}, errors.New("jetstream: lease contended")
}

func (s *Store) Renew(ctx context.Context, name string, token uint64, ttl time.Duration) (durable.Lease, error) {
	return s.change(ctx, name, token, func(v leaseValue) leaseValue {
		v.Expires = s.o.Now().Add(ttl).UnixNano()
		return v
	})
}

// Release frees the lease. Where markers expire (markerTTL), the record
// is purged rather than rewritten as released: features name a lease per
// job, and a released record kept for ever per job would grow the bucket
// without bound. Tokens stay monotonic: the next acquisition writes a new
// record first, whose revision (a stream sequence) is larger than any
// earlier token, and a holder of the old token finds no record (fenced).
func (s *Store) Release(ctx context.Context, name string, token uint64) error {
	if s.markerTTL == 0 {
		_, err := s.change(ctx, name, token, func(v leaseValue) leaseValue {
			return leaseValue{Token: v.Token}
		})
		return err
	}
	ctx, cancel, err := s.op(ctx, name)
	if err != nil {
		return err
	}
	defer cancel()
	k := encodeKey(name)
	for range maxLeaseRaces {
		v, rev, err := s.readLease(ctx, k)
		if errors.Is(err, durable.ErrNotFound) {
			return durable.ErrFenced
		}
		if err != nil {
			return err
		}
		if v.Token != token || v.Owner == "" {
			return durable.ErrFenced
		}
		err = s.leases.Purge(ctx, k, jetstream.LastRevision(rev), jetstream.PurgeTTL(s.markerTTL))
		if err == nil {
			s.writes.lease.Add(1)
			return nil
		}
		if !wrongLast(err) {
			return s.fail(err)
		}
	}
	return errors.New("jetstream: lease contended")
}
