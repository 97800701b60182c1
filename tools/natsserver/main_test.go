package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"adhost/store/jetstream"
)

func TestFlags(t *testing.T) {
	for _, args := range [][]string{{"-listen", "nohost"}, {"-listen", "127.0.0.1:x"}, {"extra"}} {
		if err := run(args, &strings.Builder{}, &strings.Builder{}); err == nil {
			t.Errorf("%q accepted", args)
		}
	}
}

// The command serves JetStream: a host's store opens on it.
func TestServes(t *testing.T) {
	out := &syncWriter{ch: make(chan string, 1)}
	go run([]string{"-listen", "127.0.0.1:0", "-store", t.TempDir()}, out, &strings.Builder{})
	var url string
	select {
	case line := <-out.ch:
		url = strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	case <-time.After(30 * time.Second):
		t.Fatal("no listening line")
	}
	st, err := jetstream.Open(context.Background(), jetstream.Options{URLs: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Create(context.Background(), "a/b", []byte("v")); err != nil {
		t.Fatal(err)
	}
}

type syncWriter struct{ ch chan string }

func (w *syncWriter) Write(p []byte) (int, error) {
	select {
	case w.ch <- string(p):
	default:
	}
	return len(p), nil
}
