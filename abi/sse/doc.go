// Package sse is an incremental parser for Server-Sent Events streams,
// following the WHATWG HTML "event stream interpretation" rules: lines end
// with LF, CR or CRLF (a CR at the end of one read followed by LF at the
// start of the next is one line end), a leading UTF-8 BOM is skipped,
// comment lines (":…") are ignored, a field without a colon has an empty
// value, one space after the colon is removed, several data lines are joined
// with '\n', an event with no data is not dispatched, the event name
// defaults to "message", the last event id persists across events, and an
// unterminated event at end of stream is discarded.
//
// The parser yields the same events however the input bytes are split into
// reads. It bounds the size of one event (MaxEventBytes) and counts the data
// bytes it dispatched, so callers can enforce a cumulative stream bound. A
// Reader can be Reset onto a new stream to reuse its buffers.
//
// It is standard library only and builds for wasip1: the host uses it to
// frame upstream responses for extensions (http_next_event), and the Go
// client uses it to read the host's streams. It does not validate UTF-8;
// callers that must (the client) use [Event.ValidUTF8].
package sse
