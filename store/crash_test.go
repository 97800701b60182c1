//go:build unix

package store_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"adhost/store"
)

// crashChildEnv names the store directory the child writes to; set, it
// makes TestCrashKeepsAcknowledgedWrites the child.
const crashChildEnv = "ADHOST_STORE_CRASH_DIR"

const (
	crashWriters = 8
	crashRecs    = 3 // records per Append
)

// crashValue is the value of a KV key, and crashRecord a log record: both
// determined by their names, so the parent can check them byte for byte.
// Some are large enough for Badger's value log, most stay in its LSM tree.
func crashValue(key string) []byte { return crashBytes(key, len(key)*7%5) }

func crashRecord(log string, seq uint64) []byte {
	return crashBytes(fmt.Sprintf("%s#%d", log, seq), int(seq%7))
}

func crashBytes(seed string, kind int) []byte {
	n := 200 + kind*40
	if kind == 4 {
		n = 70 << 10 // past the value threshold
	}
	return bytes.Repeat([]byte(seed+";"), n/(len(seed)+1)+1)[:n]
}

// TestCrashKeepsAcknowledgedWrites kills a writing process with SIGKILL,
// three times over the same directory, and checks after each kill that
// every write the child acknowledged (printed after its call returned nil)
// is in the reopened store, intact, and that no Append is half there: the
// child appends three records at a time, so every log holds a multiple of
// three, each record the one written at its sequence.
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	for round := range 3 {
		acks := crashRound(t, dir, round, 150+round*100)
		s := open(t, dir)
		ctx := t.Context()
		kvs, logs := 0, 0
		for _, a := range acks {
			switch a.kind {
			case "kv":
				e, err := s.Get(ctx, a.name)
				if err != nil || e.Revision != a.n || !bytes.Equal(e.Value, crashValue(a.name)) {
					t.Fatalf("round %d: acknowledged %s rev %d: got rev %d, %d bytes, %v", round, a.name, a.n, e.Revision, len(e.Value), err)
				}
				kvs++
			case "log":
				if last, err := s.Last(ctx, a.name); err != nil || last < a.n {
					t.Fatalf("round %d: acknowledged %s up to %d: last %d %v", round, a.name, a.n, last, err)
				}
				logs++
			}
		}
		for w := range crashWriters {
			name := fmt.Sprintf("crash/log/%d", w)
			last, _ := s.Last(ctx, name)
			recs, err := s.Read(ctx, name, 0, 0, 0)
			if err != nil || uint64(len(recs)) != last || last%crashRecs != 0 {
				t.Fatalf("round %d: %s: %d records, last %d, %v", round, name, len(recs), last, err)
			}
			for i, r := range recs {
				if r.Seq != uint64(i+1) || !bytes.Equal(r.Data, crashRecord(name, r.Seq)) {
					t.Fatalf("round %d: %s record %d: seq %d, %d bytes, not as written", round, name, i+1, r.Seq, len(r.Data))
				}
			}
		}
		s.Close()
		if kvs == 0 || logs == 0 {
			t.Fatalf("round %d: the child acknowledged %d creates and %d appends before the kill", round, kvs, logs)
		}
		t.Logf("round %d: %d acknowledged creates and %d appends survived SIGKILL", round, kvs, logs)
	}
}

type crashAck struct {
	kind, name string
	n          uint64 // kv: revision; log: last sequence
}

// crashRound starts the child on dir, kills it once it has acknowledged
// kill writes, and returns every acknowledgement it printed.
func crashRound(t *testing.T, dir string, round, kill int) []crashAck {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashKeepsAcknowledgedWrites$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, "ADHOST_STORE_CRASH_ROUND="+strconv.Itoa(round))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acks []crashAck
	sc := bufio.NewScanner(out)
	killed := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "ack" {
			continue
		}
		n, _ := strconv.ParseUint(f[3], 10, 64)
		acks = append(acks, crashAck{kind: f[1], name: f[2], n: n})
		if len(acks) == kill && !killed {
			cmd.Process.Signal(syscall.SIGKILL)
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child ended before the kill: %v", err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v", err)
	}
	return acks
}

// crashChild writes until it is killed: each writer creates keys of its
// own and appends three records at a time to its log, printing each
// acknowledgement once the call has returned nil.
func crashChild(dir string) {
	round := os.Getenv("ADHOST_STORE_CRASH_ROUND")
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	var mu sync.Mutex
	ack := func(kind, name string, n uint64) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(os.Stdout, "ack %s %s %d\n", kind, name, n)
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	for w := range crashWriters {
		go func() {
			log := fmt.Sprintf("crash/log/%d", w)
			last, err := s.Last(ctx, log)
			if err != nil {
				fail(err)
			}
			for i := 0; ; i++ {
				key := fmt.Sprintf("crash/kv/%s/%d/%d", round, w, i)
				rev, err := s.Create(ctx, key, crashValue(key))
				if err != nil {
					fail(err)
				}
				ack("kv", key, rev)
				recs := make([][]byte, crashRecs)
				for j := range recs {
					recs[j] = crashRecord(log, last+uint64(j)+1)
				}
				if last, err = s.Append(ctx, log, last, recs...); err != nil {
					fail(err)
				}
				ack("log", log, last)
			}
		}()
	}
	time.Sleep(time.Minute) // the parent kills us long before
	fail(fmt.Errorf("not killed"))
}
