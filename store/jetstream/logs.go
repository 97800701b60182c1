package jetstream

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"adhost/runtime/durable"
)

// Logs: one subject per append, "<prefix>.log.<encoded name>.<seq>", in
// the log stream, where seq is the log sequence of the append's first
// record. An append of several records is one message (a frame: each
// record as a uvarint length and its bytes, header Adhost-N = the count),
// so it commits whole or not at all without atomic batches; an append of
// one record is the record itself.
//
//   - Last: the last message of "<…name>.*" (a direct get by subject with
//     a wildcard), its seq plus its count minus one.
//   - Append: that message's stream sequence S is the check: the publish
//     carries Nats-Expected-Last-Subject-Sequence S with the subject
//     "<…name>.*", so a concurrent append in between makes the server
//     refuse it (durable.ErrSequence). The log's own sequences have no
//     gaps because the next subject is always last+1.
//   - Read(after): the message of subject "<…name>.<after+1>" gives the
//     stream sequence to start at (when after+1 is inside a frame, the
//     read starts at the log's first message and skips); then one batched
//     direct get of "<…name>.*" from there returns the page.
//   - DeleteLog: a purge of "<…name>.*".
//
// A subject per append also keeps logs apart whatever their names: the
// last token is always a number, and "a.*" never matches "a.b.1".

const headerCount = "Adhost-N"

// logShard is one of the log streams; a log lives in the one its name's
// hash picks (locate), so the logs of concurrent jobs sync on several
// streams at once.
type logShard struct {
	stream jetstream.Stream
	name   string // the stream's name, "<prefix>_LOGS_<i>"
	root   string // its subjects' first tokens, "<prefix>.log<i>"
	writes atomic.Uint64
}

// logAt is a log located: its shard, its subjects' stem
// "<root>.<encoded name>" (a record's subject is the stem and its
// sequence) and the filter of all of them. An operation locates its log
// once.
type logAt struct {
	sh     *logShard
	stem   string
	filter string
}

// locate finds a log's shard, FNV-1a of its name, the same on every host.
func (s *Store) locate(log string) logAt {
	h := fnv.New32a()
	h.Write([]byte(log))
	sh := &s.logs[h.Sum32()%uint32(len(s.logs))]
	stem := sh.root + "." + encodeKey(log)
	return logAt{sh: sh, stem: stem, filter: stem + ".*"}
}

func (l logAt) subject(seq uint64) string { return l.stem + "." + strconv.FormatUint(seq, 10) }

// frame is one stored message of a log.
type frame struct {
	streamSeq uint64
	first     uint64 // log sequence of its first record
	recs      [][]byte
}

func (f frame) last() uint64 { return f.first + uint64(len(f.recs)) - 1 }

func parseFrame(m rawMsg) (frame, error) {
	i := strings.LastIndexByte(m.subject, '.')
	first, err := strconv.ParseUint(m.subject[i+1:], 10, 64)
	if err != nil || first == 0 {
		return frame{}, fmt.Errorf("jetstream: log message %s not written by this backend", m.subject)
	}
	f := frame{streamSeq: m.seq, first: first}
	n := m.header.Get(headerCount)
	if n == "" {
		f.recs = [][]byte{m.data}
		return f, nil
	}
	count, err := strconv.Atoi(n)
	if err != nil || count < 1 {
		return frame{}, fmt.Errorf("jetstream: log message %s: bad %s", m.subject, headerCount)
	}
	b := m.data
	for range count {
		l, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < l {
			return frame{}, fmt.Errorf("jetstream: log message %s: truncated frame", m.subject)
		}
		f.recs = append(f.recs, b[k:k+int(l)])
		b = b[k+int(l):]
	}
	return f, nil
}

// lastFrame returns the log's last message, or a zero frame (streamSeq 0)
// for an empty log.
func (s *Store) lastFrame(ctx context.Context, at logAt) (frame, error) {
	m, err := s.getLast(ctx, at.sh, at.filter)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return frame{}, nil
	}
	if err != nil {
		return frame{}, err
	}
	return parseFrame(m)
}

func (s *Store) Append(ctx context.Context, log string, expectLast uint64, recs ...[]byte) (uint64, error) {
	ctx, cancel, err := s.op(ctx, log)
	if err != nil {
		return 0, err
	}
	defer cancel()
	at := s.locate(log)
	if len(recs) == 0 {
		last, err := s.lastSeq(ctx, at)
		if err != nil {
			return 0, s.fail(err)
		}
		if last != expectLast {
			return 0, durable.ErrSequence
		}
		return last, nil
	}
	msg := nats.NewMsg(at.subject(expectLast + 1))
	if len(recs) == 1 {
		msg.Data = recs[0]
	} else {
		n := 0
		for _, r := range recs {
			n += binary.MaxVarintLen64 + len(r)
		}
		b := make([]byte, 0, n)
		for _, r := range recs {
			b = binary.AppendUvarint(b, uint64(len(r)))
			b = append(b, r...)
		}
		msg.Data = b
		msg.Header.Set(headerCount, strconv.Itoa(len(recs)))
	}
	// The stream sequence of the log's last message is the check. This
	// process's last append to the log gives it without a lookup (the
	// usual case: one writer per log); when it is stale, or unknown, the
	// server refuses or there is nothing cached, and the lookup decides.
	tail, cached := s.tails.get(log, expectLast)
	for attempt := 0; ; attempt++ {
		if !cached {
			f, err := s.lastFrame(ctx, at)
			if err != nil {
				return 0, s.fail(err)
			}
			last := uint64(0)
			if f.streamSeq != 0 {
				last = f.last()
			}
			if last != expectLast {
				s.tails.forget(log)
				return 0, durable.ErrSequence
			}
			tail = f.streamSeq
		}
		ack, err := s.js.PublishMsg(ctx, msg, jetstream.WithExpectLastSequenceForSubject(tail, at.filter))
		if err == nil {
			s.writes.logMsgs.Add(1)
			at.sh.writes.Add(1)
			s.writes.logRecs.Add(uint64(len(recs)))
			s.tails.put(log, expectLast+uint64(len(recs)), ack.Sequence)
			return expectLast + uint64(len(recs)), nil
		}
		s.tails.forget(log)
		if !wrongLast(err) {
			return 0, s.fail(err)
		}
		if !cached || attempt > 0 {
			return 0, durable.ErrSequence
		}
		cached = false // stale: look the log up
	}
}

// lastSeq is the log's last sequence.
func (s *Store) lastSeq(ctx context.Context, at logAt) (uint64, error) {
	f, err := s.lastFrame(ctx, at)
	if err != nil || f.streamSeq == 0 {
		return 0, err
	}
	return f.last(), nil
}

// tails remembers, per log this process appended to, the log sequence
// and stream sequence of its last message: a bounded cache that only
// saves lookups (the server checks every append).
type tails struct {
	mu sync.Mutex
	m  map[string][2]uint64
}

const maxTails = 4096

func (t *tails) get(log string, last uint64) (uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.m[log]
	if !ok || v[0] != last {
		return 0, false
	}
	return v[1], true
}

func (t *tails) put(log string, last, streamSeq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string][2]uint64{}
	}
	if _, ok := t.m[log]; !ok && len(t.m) >= maxTails {
		for k := range t.m { // drop one, any
			delete(t.m, k)
			break
		}
	}
	t.m[log] = [2]uint64{last, streamSeq}
}

func (t *tails) forget(log string) {
	t.mu.Lock()
	delete(t.m, log)
	t.mu.Unlock()
}

func (s *Store) Read(ctx context.Context, log string, after uint64, limit, maxBytes int) ([]durable.Record, error) {
	s.writes.reads.Add(1)
	ctx, cancel, err := s.op(ctx, log)
	if err != nil {
		return nil, err
	}
	defer cancel()
	at := s.locate(log)
	if s.direct && limit > 0 && limit <= maxLiteral {
		// A page: its records' subjects are known, and a get of literal
		// subjects costs the server one index lookup each, where a
		// wildcard filter costs it every subject of the log.
		recs, ok, err := s.readLiteral(ctx, at, after, limit, maxBytes)
		if err != nil {
			return nil, s.fail(err)
		}
		if ok {
			return recs, nil
		}
	}
	start := uint64(1)
	if after > 0 {
		m, err := s.getLast(ctx, at.sh, at.subject(after+1))
		switch {
		case err == nil:
			start = m.seq
		case !errors.Is(err, jetstream.ErrMsgNotFound):
			return nil, s.fail(err)
		default:
			// after+1 is inside a frame, or past the end.
			f, err := s.lastFrame(ctx, at)
			if err != nil {
				return nil, s.fail(err)
			}
			if f.streamSeq == 0 || f.last() <= after {
				return nil, nil
			}
		}
	}
	var out []durable.Record
	total := 0
	var ferr error
	each := func(m rawMsg) bool {
		f, err := parseFrame(m)
		if err != nil {
			ferr = err
			return false
		}
		for i, d := range f.recs {
			seq := f.first + uint64(i)
			if seq <= after {
				continue
			}
			if len(out) > 0 && ((limit > 0 && len(out) >= limit) || (maxBytes > 0 && total+len(d) > maxBytes)) {
				return false
			}
			out = append(out, durable.Record{Seq: seq, Data: d})
			total += len(d)
		}
		return true
	}
	if s.direct {
		err = s.scan(ctx, at.sh.name, at.filter, start, each)
	} else {
		for seq := start; ; {
			var m *jetstream.RawStreamMsg
			m, err = at.sh.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(at.filter))
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				err = nil
				break
			}
			if err != nil || !each(rawMsg{subject: m.Subject, seq: m.Sequence, header: m.Header, data: m.Data}) {
				break
			}
			seq = m.Sequence + 1
		}
	}
	if err == nil {
		err = ferr
	}
	if err != nil {
		return nil, s.fail(err)
	}
	return out, nil
}

func (s *Store) Last(ctx context.Context, log string) (uint64, error) {
	s.writes.reads.Add(1)
	ctx, cancel, err := s.op(ctx, log)
	if err != nil {
		return 0, err
	}
	defer cancel()
	last, err := s.lastSeq(ctx, s.locate(log))
	if err != nil {
		return 0, s.fail(err)
	}
	return last, nil
}

func (s *Store) DeleteLog(ctx context.Context, log string) error {
	ctx, cancel, err := s.op(ctx, log)
	if err != nil {
		return err
	}
	defer cancel()
	s.tails.forget(log)
	at := s.locate(log)
	if err := at.sh.stream.Purge(ctx, jetstream.WithPurgeSubject(at.filter)); err != nil {
		return s.fail(err)
	}
	return nil
}

// rawMsg is a stored message as a get returns it.
type rawMsg struct {
	subject string
	seq     uint64
	header  nats.Header
	data    []byte
}

// getLast returns the last message of subject (wildcards allowed) in the
// log stream sh: a direct get, or with replicas the leader's answer.
func (s *Store) getLast(ctx context.Context, sh *logShard, subject string) (rawMsg, error) {
	if !s.direct {
		m, err := sh.stream.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			return rawMsg{}, err
		}
		return rawMsg{subject: m.Subject, seq: m.Sequence, header: m.Header, data: m.Data}, nil
	}
	req, _ := json.Marshal(directRequest{LastFor: subject})
	resp, err := s.nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+sh.name, req)
	if err != nil {
		return rawMsg{}, err
	}
	return directMsg(resp)
}

// directRequest is the body of a direct get ($JS.API.DIRECT.GET.<stream>).
type directRequest struct {
	Seq      uint64 `json:"seq,omitempty"`
	LastFor  string `json:"last_by_subj,omitempty"`
	NextFor  string `json:"next_by_subj,omitempty"`
	Batch    int    `json:"batch,omitempty"`
	MaxBytes int    `json:"max_bytes,omitempty"`
}

// directMsg reads one answer of a direct get: a message with its stream,
// subject and sequence in headers, or a status without data.
func directMsg(m *nats.Msg) (rawMsg, error) {
	if st := m.Header.Get("Status"); st != "" && len(m.Data) == 0 {
		switch st {
		case "404":
			return rawMsg{}, jetstream.ErrMsgNotFound
		case "204":
			return rawMsg{}, errEOB
		}
		return rawMsg{}, fmt.Errorf("direct get: status %s %s", st, m.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(m.Header.Get("Nats-Sequence"), 10, 64)
	if err != nil {
		return rawMsg{}, errors.New("direct get: no sequence header")
	}
	return rawMsg{subject: m.Header.Get("Nats-Subject"), seq: seq, header: m.Header, data: m.Data}, nil
}

var errEOB = errors.New("end of batch")

// scanBatch is how many messages one batched direct get asks for.
const scanBatch = 256

// scan calls each for the messages of filter in stream from stream
// sequence start on, in order, one batched direct get per scanBatch
// messages, until each returns false or none are left.
func (s *Store) scan(ctx context.Context, stream, filter string, start uint64, each func(rawMsg) bool) error {
	inbox := s.nc.NewInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	for seq := start; ; {
		req, _ := json.Marshal(directRequest{Seq: seq, NextFor: filter, Batch: scanBatch})
		if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
			return err
		}
		got := 0
		for {
			m, err := sub.NextMsgWithContext(ctx)
			if err != nil {
				return err
			}
			r, err := directMsg(m)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return nil // nothing (more) at or after seq
			}
			if errors.Is(err, errEOB) {
				pending, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
				if pending == 0 || got == 0 {
					return nil
				}
				break
			}
			if err != nil {
				return err
			}
			got++
			seq = r.seq + 1
			if !each(r) {
				return nil // the rest of the batch goes with the inbox
			}
		}
	}
}

// maxLiteral bounds the subjects of one literal page read (the server
// answers at most 1,024 of a multi-subject get).
const maxLiteral = 1000

// readLiteral reads up to limit records after after with one multi-subject
// direct get of the subjects "<…name>.<after+1>" … "<…name>.<after+limit>".
// ok is false when record after+1 has no message of its own (it is inside
// a multi-record frame, or past the end): the caller then reads by filter.
func (s *Store) readLiteral(ctx context.Context, at logAt, after uint64, limit, maxBytes int) ([]durable.Record, bool, error) {
	subjects := make([]string, limit)
	for i := range subjects {
		subjects[i] = at.subject(after + 1 + uint64(i))
	}
	req, _ := json.Marshal(struct {
		MultiLast []string `json:"multi_last"`
		Batch     int      `json:"batch"`
	}{subjects, limit})
	inbox := s.nc.NewInbox()
	sub, err := s.nc.SubscribeSync(inbox)
	if err != nil {
		return nil, false, err
	}
	defer sub.Unsubscribe()
	if err := s.nc.PublishRequest("$JS.API.DIRECT.GET."+at.sh.name, inbox, req); err != nil {
		return nil, false, err
	}
	var out []durable.Record
	total, next := 0, after+1
	done := false
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return nil, false, err
		}
		r, err := directMsg(m)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return nil, false, nil
		case errors.Is(err, errEOB):
			return out, len(out) > 0, nil
		case err != nil:
			return nil, false, err
		}
		if done {
			continue // drain the rest of the answer
		}
		f, err := parseFrame(r)
		if err != nil {
			return nil, false, err
		}
		if f.first != next {
			if len(out) == 0 {
				return nil, false, nil
			}
			done = true // a gap: the page ends before it
			continue
		}
		for _, d := range f.recs {
			if len(out) > 0 && (len(out) >= limit || (maxBytes > 0 && total+len(d) > maxBytes)) {
				done = true
				break
			}
			out = append(out, durable.Record{Seq: next, Data: d})
			total += len(d)
			next++
		}
	}
}
