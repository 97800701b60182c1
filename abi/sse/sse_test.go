package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type ev struct{ Name, Data, ID string }

func readAll(t testing.TB, src io.Reader, opts ...Option) ([]ev, error) {
	return drain(NewReader(src, opts...))
}

// drain reads r to its end.
func drain(r *Reader) ([]ev, error) {
	var out []ev
	for {
		e, err := r.Next()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		out = append(out, ev{e.Name, string(e.Data), e.ID})
	}
}

func TestRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []ev
	}{
		{"lf", "data: a\n\n", []ev{{"message", "a", ""}}},
		{"crlf", "data: a\r\n\r\n", []ev{{"message", "a", ""}}},
		{"cr", "data: a\r\rdata: b\r\r", []ev{{"message", "a", ""}, {"message", "b", ""}}},
		{"mixed terminators", "data: a\r\ndata: b\rdata: c\n\r\n", []ev{{"message", "a\nb\nc", ""}}},
		{"bom", "\xEF\xBB\xBFdata: a\n\n", []ev{{"message", "a", ""}}},
		{"bom only at start", "data: a\n\n\xEF\xBB\xBFdata: b\n\n", []ev{{"message", "a", ""}}},
		{"two boms", "\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\n", nil},
		{"comment", ": hello\ndata: a\n: mid\n\n", []ev{{"message", "a", ""}}},
		{"comment only", ": heartbeat\n\n", nil},
		{"no space", "data:a\n\n", []ev{{"message", "a", ""}}},
		{"two spaces keep one", "data:  a\n\n", []ev{{"message", " a", ""}}},
		{"colon in value", "data: a:b\n\n", []ev{{"message", "a:b", ""}}},
		{"field without colon", "data\n\n", []ev{{"message", "", ""}}},
		{"field without colon joins", "data\ndata\n\n", []ev{{"message", "\n", ""}}},
		{"empty data dispatches", "data:\n\n", []ev{{"message", "", ""}}},
		{"multiline", "data: a\ndata: b\n\n", []ev{{"message", "a\nb", ""}}},
		{"event name", "event: x\ndata: a\n\ndata: b\n\n", []ev{{"x", "a", ""}, {"message", "b", ""}}},
		{"empty event name", "event:\ndata: a\n\n", []ev{{"message", "a", ""}}},
		{"name without data is dropped", "event: x\n\ndata: a\n\n", []ev{{"message", "a", ""}}},
		{"id persists", "id: 1\ndata: a\n\ndata: b\n\nid\ndata: c\n\n", []ev{{"message", "a", "1"}, {"message", "b", "1"}, {"message", "c", ""}}},
		{"id with nul ignored", "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n", []ev{{"message", "a", "1"}, {"message", "b", "1"}}},
		{"id without data", "id: 7\n\ndata: a\n\n", []ev{{"message", "a", "7"}}},
		{"retry and unknown ignored", "retry: 100\nfoo: bar\ndata: a\n\n", []ev{{"message", "a", ""}}},
		{"case sensitive", "Data: a\n\n", nil},
		{"unterminated event discarded", "data: a\n\ndata: b\n", []ev{{"message", "a", ""}}},
		{"unterminated line discarded", "data: a\n\ndata: b", []ev{{"message", "a", ""}}},
		{"crlf blank", "data: a\r\n\r\ndata: b\r\n\r\n", []ev{{"message", "a", ""}, {"message", "b", ""}}},
		{"leading blank lines", "\n\n\ndata: a\n\n", []ev{{"message", "a", ""}}},
		{"empty stream", "", nil},
		{"bom only", "\xEF\xBB\xBF", nil},
		{"space before colon is name", "data : a\n\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []string{"whole", "bytes"} {
				var src io.Reader = strings.NewReader(tc.in)
				if mode == "bytes" {
					src = iotest.OneByteReader(src)
				}
				got, err := readAll(t, src)
				if err != nil {
					t.Fatalf("%s: error %v", mode, err)
				}
				if fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Errorf("%s: got %q, want %q", mode, got, tc.want)
				}
			}
		})
	}
}

// TestCRAtChunkEnd: a CR ending one read and an LF starting the next are one
// line end, not a line end plus an empty line (which would dispatch early).
func TestCRAtChunkEnd(t *testing.T) {
	src := io.MultiReader(strings.NewReader("data: a\r"), strings.NewReader("\ndata: b\r"), strings.NewReader("\n\r"), strings.NewReader("\n"))
	got, err := readAll(t, src)
	if err != nil {
		t.Fatal(err)
	}
	want := []ev{{"message", "a\nb", ""}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestTooLarge(t *testing.T) {
	// A single long line without a terminator.
	_, err := readAll(t, strings.NewReader("data: "+strings.Repeat("x", 100)), WithMaxEventBytes(50))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("long line: err = %v, want ErrTooLarge", err)
	}
	// Many short lines in one event.
	_, err = readAll(t, strings.NewReader(strings.Repeat("data: xxxxxxxx\n", 10)+"\n"), WithMaxEventBytes(50))
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("many lines: err = %v, want ErrTooLarge", err)
	}
	// The bound is per event: many small events pass.
	got, err := readAll(t, strings.NewReader(strings.Repeat("data: xxxxxxxx\n\n", 100)), WithMaxEventBytes(50))
	if err != nil || len(got) != 100 {
		t.Errorf("small events: %d events, err = %v", len(got), err)
	}
	// Exactly at the bound passes ("data: " + 44 = 50).
	if _, err := readAll(t, strings.NewReader("data: "+strings.Repeat("x", 44)+"\n\n"), WithMaxEventBytes(50)); err != nil {
		t.Errorf("at bound: %v", err)
	}
}

func TestDataBytesAndSticky(t *testing.T) {
	r := NewReader(strings.NewReader("data: abc\n\ndata: de\ndata: f\n\n"))
	for {
		if _, err := r.Next(); err != nil {
			break
		}
	}
	if got := r.DataBytes(); got != 3+4 {
		t.Errorf("DataBytes() = %d, want 7", got)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Errorf("Next after EOF = %v", err)
	}
	boom := errors.New("boom")
	r = NewReader(iotest.ErrReader(boom))
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Errorf("read error: %v", err)
	}
}

func TestDataValidUntilNext(t *testing.T) {
	r := NewReader(strings.NewReader("data: first\n\ndata: second\n\n"))
	e1, _ := r.Next()
	keep := string(e1.Data)
	e2, _ := r.Next()
	if keep != "first" || string(e2.Data) != "second" {
		t.Errorf("got %q, %q", keep, e2.Data)
	}
}

func TestValidUTF8(t *testing.T) {
	if !(Event{Name: "message", Data: []byte("é")}).ValidUTF8() {
		t.Error("valid event reported invalid")
	}
	// Split UTF-8 across reads still parses into valid data.
	got, _ := readAll(t, iotest.OneByteReader(strings.NewReader("data: héllo €\n\n")))
	if len(got) != 1 || got[0].Data != "héllo €" {
		t.Errorf("got %q", got)
	}
	if (Event{Name: "message", Data: []byte{0xff}}).ValidUTF8() {
		t.Error("invalid data reported valid")
	}
}

// TestReset: a reset Reader parses a new stream exactly as a new Reader
// would, whatever state the previous stream left behind.
func TestReset(t *testing.T) {
	leftovers := []struct{ name, in string }{
		{"last event id", "id: 7\ndata: a\n\n"},
		{"pending data and name", "event: x\ndata: a\ndata: b"},
		{"pending line", "data: a\n\ndata: partial"},
		{"cr at end", "data: a\r\r"},
		{"bom consumed", "\xEF\xBB\xBFdata: a\n\n"},
		{"half a bom", "\xEF\xBB"},
		{"too large", "data: " + strings.Repeat("x", 100)},
		{"read error", ""},
		{"empty", ""},
	}
	next := []string{
		"\ndata: b\n\n",                             // an LF first: not skipped as the CR's pair
		"\xEF\xBB\xBFdata: b\n\n",                   // a BOM at the start of the new stream
		"data: b\n\nid: 2\ndata: c\n\n",             // ids start from none
		"event: y\ndata: b\n\ndata: c\n\n",          // names do not carry over
		"data: " + strings.Repeat("y", 40) + "\n\n", // within the bound
		"",
	}
	for _, lo := range leftovers {
		for _, in := range next {
			r := NewReader(strings.NewReader(lo.in), WithMaxEventBytes(50))
			if lo.name == "read error" {
				r = NewReader(iotest.ErrReader(errors.New("boom")), WithMaxEventBytes(50))
			}
			if lo.name != "empty" {
				_, _ = r.Next()
				_, _ = r.Next() // stop mid-stream or on a sticky error
			}
			r.Reset(strings.NewReader(in))
			got, err := drain(r)
			want, wantErr := readAll(t, strings.NewReader(in), WithMaxEventBytes(50))
			if fmt.Sprint(got) != fmt.Sprint(want) || err != wantErr {
				t.Errorf("%s then %q: got %q (%v), want %q (%v)", lo.name, in, got, err, want, wantErr)
			}
			if r.DataBytes() != dataBytes(want) || r.LastEventID() != lastID(want) {
				t.Errorf("%s then %q: DataBytes %d, LastEventID %q", lo.name, in, r.DataBytes(), r.LastEventID())
			}
		}
	}
	// The bound survives Reset.
	r := NewReader(strings.NewReader(""), WithMaxEventBytes(50))
	r.Reset(strings.NewReader("data: " + strings.Repeat("x", 100) + "\n\n"))
	if _, err := r.Next(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("after Reset: err = %v, want ErrTooLarge", err)
	}
}

func dataBytes(evs []ev) int64 {
	var n int64
	for _, e := range evs {
		n += int64(len(e.Data))
	}
	return n
}

func lastID(evs []ev) string {
	if len(evs) == 0 {
		return ""
	}
	return evs[len(evs)-1].ID
}

// TestResetReusesBuffers: a Reader reset for a stream like the last one
// does not allocate.
func TestResetReusesBuffers(t *testing.T) {
	in := strings.Repeat("event: delta\ndata: {\"text\":\"hello\"}\n\n", 20)
	src := strings.NewReader(in)
	r := NewReader(src)
	if _, err := drain(r); err != nil {
		t.Fatal(err)
	}
	c := r.BufferCap()
	if c < 4096 {
		t.Errorf("BufferCap() = %d, want at least the read buffer", c)
	}
	allocs := testing.AllocsPerRun(10, func() {
		src.Reset(in)
		r.Reset(src)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	})
	if allocs != 0 || r.BufferCap() != c {
		t.Errorf("%v allocations per reused stream, BufferCap %d -> %d", allocs, c, r.BufferCap())
	}
}

// chunkReader splits input at the given sizes (cycling), never returning
// an empty read.
type chunkReader struct {
	data  []byte
	sizes []byte
	i     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(c.sizes) > 0 {
		n = int(c.sizes[c.i%len(c.sizes)])%17 + 1
		c.i++
	}
	n = min(n, len(p), len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func FuzzChunking(f *testing.F) {
	f.Add([]byte("data: a\r\n\r\nevent: x\rdata: b\r\r"), []byte{1, 2, 3})
	f.Add([]byte("\xEF\xBB\xBFid: 1\ndata\n\n: c\n\n"), []byte{0})
	f.Add([]byte("data: a\r"), []byte{7, 0})
	f.Fuzz(func(t *testing.T, in, sizes []byte) {
		whole, errW := readAll(t, bytes.NewReader(in), WithMaxEventBytes(64))
		chunked, errC := readAll(t, &chunkReader{data: in, sizes: sizes}, WithMaxEventBytes(64))
		if fmt.Sprint(whole) != fmt.Sprint(chunked) || (errW == nil) != (errC == nil) {
			t.Fatalf("whole %q (%v) != chunked %q (%v)", whole, errW, chunked, errC)
		}
		// A Reader reused after parsing the input (sticky errors, ids and
		// partial events included) parses it again the same way.
		r := NewReader(&chunkReader{data: in, sizes: sizes}, WithMaxEventBytes(64))
		_, _ = drain(r)
		r.Reset(&chunkReader{data: in, sizes: sizes})
		reused, errR := drain(r)
		if fmt.Sprint(whole) != fmt.Sprint(reused) || (errW == nil) != (errR == nil) {
			t.Fatalf("whole %q (%v) != reused %q (%v)", whole, errW, reused, errR)
		}
		for _, e := range whole {
			if e.Name == "" {
				t.Fatal("empty event name")
			}
		}
	})
}

// FuzzRoundTrip: events written with LF framing parse back unchanged.
func FuzzRoundTrip(f *testing.F) {
	f.Add("x", "a\nb", "1")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, name, data, id string) {
		if strings.ContainsAny(name+id, "\r\n\x00") || strings.Contains(data, "\r") {
			return
		}
		var b strings.Builder
		if id != "" {
			fmt.Fprintf(&b, "id: %s\n", id)
		}
		if name != "" {
			fmt.Fprintf(&b, "event: %s\n", name)
		}
		for _, l := range strings.Split(data, "\n") {
			fmt.Fprintf(&b, "data: %s\n", l)
		}
		b.WriteString("\n")
		got, err := readAll(t, strings.NewReader(b.String()))
		if err != nil || len(got) != 1 {
			t.Fatalf("got %q, %v", got, err)
		}
		wantName := name
		if wantName == "" {
			wantName = "message"
		}
		if got[0] != (ev{wantName, data, id}) {
			t.Fatalf("got %q, want %q", got[0], ev{wantName, data, id})
		}
	})
}

func BenchmarkEvents(b *testing.B) {
	one := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n"
	in := strings.Repeat(one, 1000)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(strings.NewReader(in))
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}
