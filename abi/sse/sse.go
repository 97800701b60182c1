package sse

import (
	"bytes"
	"errors"
	"io"
	"unicode/utf8"
)

// DefaultMaxEventBytes bounds one event's lines (field names included, line
// terminators excluded) when no other bound is set. It matches the 2,000,000
// byte frame bound of the wire protocol.
const DefaultMaxEventBytes = 2_000_000

// ErrTooLarge is returned when one event's lines exceed MaxEventBytes. The
// Reader is unusable afterwards.
var ErrTooLarge = errors.New("sse: event too large")

// Event is one dispatched event.
type Event struct {
	// Name is the event type: the last "event" field, or "message".
	Name string
	// Data is the data lines joined by '\n'. It is only valid until the next
	// call to Next: copy it to keep it.
	Data []byte
	// ID is the last event id seen on the stream so far (it persists across
	// events, as the spec says), "" when none.
	ID string
}

// ValidUTF8 reports whether the event's name, data and id are valid UTF-8.
func (e Event) ValidUTF8() bool {
	return utf8.ValidString(e.Name) && utf8.Valid(e.Data) && utf8.ValidString(e.ID)
}

// Option configures a Reader.
type Option func(*Reader)

// WithMaxEventBytes bounds one event's lines (field names included, line
// terminators excluded); n ≤ 0 means DefaultMaxEventBytes.
func WithMaxEventBytes(n int) Option {
	return func(r *Reader) {
		if n > 0 {
			r.max = n
		}
	}
}

// Reader parses an event stream from an io.Reader. It is not safe for
// concurrent use.
type Reader struct {
	src io.Reader
	max int

	buf    []byte // pending input is buf[r:w]
	r, w   int
	srcErr error // sticky error from src (io.EOF at end)
	err    error // sticky parse error

	started   bool // BOM check done
	skipLF    bool // previous line ended with CR: skip one LF
	lineBytes int  // bytes of the current event's lines so far

	data     []byte
	hasData  bool
	name     []byte
	id       string
	out      []byte // Data of the last dispatched event
	lastName string
	total    int64
}

// NewReader returns a Reader that parses src.
func NewReader(src io.Reader, opts ...Option) *Reader {
	r := &Reader{src: src, max: DefaultMaxEventBytes}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Reset makes r parse src from its start, as a new Reader with r's options
// would, keeping the buffers r has grown. Event data returned before the
// Reset is invalid afterwards. Reusing a Reader spares the per-stream
// allocation of its read buffer, which for a short stream such as one model
// turn is most of what parsing allocates; BufferCap tells a pool when a
// Reader grew too large to keep.
func (r *Reader) Reset(src io.Reader) {
	*r = Reader{
		src:      src,
		max:      r.max,
		buf:      r.buf,
		data:     r.data[:0],
		name:     r.name[:0],
		out:      r.out[:0],
		lastName: r.lastName, // a cache of one string: no state of the old stream
	}
}

// BufferCap returns the capacity in bytes of the buffers r keeps across
// Reset. One long event grows them up to the event bound, so a caller that
// pools Readers should drop those above a size it is willing to retain.
func (r *Reader) BufferCap() int {
	return cap(r.buf) + cap(r.data) + cap(r.name) + cap(r.out)
}

// DataBytes returns the cumulative length of the Data of every event
// dispatched so far.
func (r *Reader) DataBytes() int64 { return r.total }

// LastEventID returns the last event id seen so far.
func (r *Reader) LastEventID() string { return r.id }

// Next returns the next event. At the end of the stream it returns io.EOF
// (an unterminated trailing event is discarded); a read error of the
// underlying reader is returned as is; ErrTooLarge when an event exceeds the
// bound. Errors are sticky.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	for {
		if !r.started {
			// The BOM may be split across reads: wait for 3 bytes or EOF.
			if r.w-r.r < 3 && r.srcErr == nil {
				if err := r.fill(); err != nil {
					return Event{}, r.fail(err)
				}
				continue
			}
			r.started = true
			if bytes.HasPrefix(r.buf[r.r:r.w], bom) {
				r.r += len(bom)
			}
		}
		if r.skipLF && r.r < r.w {
			if r.buf[r.r] == '\n' {
				r.r++
			}
			r.skipLF = false
		}
		pending := r.buf[r.r:r.w]
		i := bytes.IndexAny(pending, "\r\n")
		if i < 0 {
			if r.lineBytes+len(pending) > r.max {
				return Event{}, r.fail(ErrTooLarge)
			}
			if r.srcErr != nil {
				// End of stream: a partial line and an undispatched event are
				// discarded.
				return Event{}, r.fail(r.srcErr)
			}
			if err := r.fill(); err != nil {
				return Event{}, r.fail(err)
			}
			continue
		}
		line := pending[:i]
		r.skipLF = pending[i] == '\r'
		r.r += i + 1
		if len(line) == 0 {
			if ev, ok := r.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		r.lineBytes += len(line)
		if r.lineBytes > r.max {
			return Event{}, r.fail(ErrTooLarge)
		}
		r.field(line)
	}
}

var bom = []byte{0xEF, 0xBB, 0xBF}

func (r *Reader) fail(err error) error {
	r.err = err
	return err
}

// fill reads more input, compacting or growing the buffer. It returns a
// non-EOF error only; EOF is recorded in srcErr.
func (r *Reader) fill() error {
	if r.srcErr != nil {
		return nil
	}
	if r.r > 0 {
		n := copy(r.buf, r.buf[r.r:r.w])
		r.r, r.w = 0, n
	}
	if r.w == len(r.buf) {
		size := 2 * len(r.buf)
		if size < 4096 {
			size = 4096
		}
		nb := make([]byte, size)
		copy(nb, r.buf[:r.w])
		r.buf = nb
	}
	for tries := 0; tries < 100; tries++ {
		n, err := r.src.Read(r.buf[r.w:])
		if n < 0 || n > len(r.buf)-r.w {
			return errors.New("sse: invalid Read count")
		}
		r.w += n
		if err != nil {
			if err != io.EOF {
				return err
			}
			r.srcErr = io.EOF
			return nil
		}
		if n > 0 {
			return nil
		}
	}
	return io.ErrNoProgress
}

// field processes one non-empty line.
func (r *Reader) field(line []byte) {
	if line[0] == ':' {
		return // comment
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		r.data = append(r.data, value...)
		r.data = append(r.data, '\n')
		r.hasData = true
	case "event":
		r.name = append(r.name[:0], value...)
	case "id":
		if bytes.IndexByte(value, 0) < 0 {
			if string(value) != r.id {
				r.id = string(value)
			}
		}
	}
	// "retry" and unknown fields are ignored.
}

// dispatch ends the current event at a blank line.
func (r *Reader) dispatch() (Event, bool) {
	r.lineBytes = 0
	if !r.hasData {
		r.name = r.name[:0]
		return Event{}, false
	}
	// Swap buffers so that Data stays valid until the next Next call while
	// the parser reuses the other buffer.
	r.out, r.data = r.data, r.out[:0]
	d := r.out[:len(r.out)-1] // drop the trailing '\n'
	name := "message"
	if len(r.name) > 0 {
		// Vendors repeat a few names: reuse the previous string.
		if string(r.name) != r.lastName {
			r.lastName = string(r.name)
		}
		name = r.lastName
	}
	r.name = r.name[:0]
	r.hasData = false
	r.total += int64(len(d))
	return Event{Name: name, Data: d, ID: r.id}, true
}
