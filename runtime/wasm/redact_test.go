package wasm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

// chunkReader returns src in reads of the given sizes (cycled), with EOF
// on the last one, the way a network body or a flushed stream arrives.
type chunkReader struct {
	src   []byte
	sizes []int
	i     int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.src) == 0 {
		return 0, io.EOF
	}
	n := max(1, c.sizes[c.i%len(c.sizes)])
	c.i++
	n = min(n, len(p), len(c.src))
	copy(p, c.src[:n])
	c.src = c.src[n:]
	if len(c.src) == 0 {
		return n, io.EOF
	}
	return n, nil
}

// readScrubbed reads src through a scrubReader with reads of the given
// buffer sizes (cycled).
func readScrubbed(t testing.TB, src io.Reader, red *redactor, bufSizes []int) []byte {
	t.Helper()
	var s scrubReader
	s.reset(src, red)
	var out []byte
	for i := 0; ; i++ {
		p := make([]byte, max(1, bufSizes[i%len(bufSizes)]))
		n, err := s.Read(p)
		out = append(out, p[:n]...)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if i > 1<<20 {
			t.Fatal("no progress")
		}
	}
}

// maskNaive is the reference: every byte inside any occurrence of any
// form is masked.
func maskNaive(in []byte, forms [][]byte) []byte {
	out := bytes.Clone(in)
	for _, f := range forms {
		for i := 0; i+len(f) <= len(in); i++ {
			if bytes.Equal(in[i:i+len(f)], f) {
				for j := i; j < i+len(f); j++ {
					out[j] = redactMask
				}
			}
		}
	}
	return out
}

// selfOverlaps reports whether two occurrences of s can overlap, the case
// in which masking every occurrence differs from strings.ReplaceAll.
func selfOverlaps(s string) bool {
	for k := 1; k < len(s); k++ {
		if s[:k] == s[len(s)-k:] {
			return true
		}
	}
	return false
}

func stars(s string) string { return strings.Repeat(string(rune(redactMask)), len(s)) }

func TestScrubReader(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	for _, tc := range []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{"none", []string{key}, "hello world", "hello world"},
		{"whole", []string{key}, "auth: Bearer " + key + "\n", "auth: Bearer " + stars(key) + "\n"},
		{"start and end", []string{key}, key + "--" + key, stars(key) + "--" + stars(key)},
		{"prefix at eof is not an occurrence", []string{key}, "x " + key[:10], "x " + key[:10]},
		{"adjacent", []string{key}, key + key, stars(key + key)},
		{"overlapping", []string{"abab"}, "xababab", "x******"},
		{"two secrets", []string{key, "org-42"}, "org-42/" + key, stars("org-42") + "/" + stars(key)},
		{"nested", []string{"abcdef", "cd"}, "xabcdefcdx", "x********x"},
		{"json escaped", []string{"k/<&>y"}, `{"h":"k\/<&>y","g":"k/\u003c\u0026\u003ey"}`,
			`{"h":"` + stars(`k\/<&>y`) + `","g":"` + stars(`k/\u003c\u0026\u003ey`) + `"}`},
	} {
		red := newRedactor(tc.secrets)
		for _, sizes := range [][]int{{1 << 20}, {1}, {2}, {3}, {7}, {1, 5, 2}} {
			for _, bufs := range [][]int{{4096}, {1}, {3}, {5, 1, 64}} {
				got := readScrubbed(t, &chunkReader{src: []byte(tc.in), sizes: sizes}, red, bufs)
				if string(got) != tc.want {
					t.Errorf("%s: chunks %v reads %v: got %q, want %q", tc.name, sizes, bufs, got, tc.want)
				}
			}
		}
	}
}

// TestScrubReaderHoldsOnlyAPrefix: bytes that cannot start a secret are
// released at once, so a streamed event is never held back waiting for
// the next one.
func TestScrubReaderHoldsOnlyAPrefix(t *testing.T) {
	red := newRedactor([]string{"sk-abcdefghijklmnopqrstuvwxyz"})
	pr, pw := io.Pipe()
	defer pr.Close()
	var s scrubReader
	s.reset(pr, red)
	go pw.Write([]byte("data: {\"x\":1}\n\n"))
	buf := make([]byte, 64)
	n, err := s.Read(buf)
	if err != nil || string(buf[:n]) != "data: {\"x\":1}\n\n" {
		t.Fatalf("Read = %q, %v; want the whole event", buf[:n], err)
	}
	// "sk-ab" may start the secret: held until the rest arrives.
	go pw.Write([]byte("data: sk-ab"))
	n, _ = s.Read(buf)
	if string(buf[:n]) != "data: " {
		t.Fatalf("Read = %q, want %q", buf[:n], "data: ")
	}
	go func() {
		pw.Write([]byte("cdefghijklmnopqrstuvwxyz\n\n"))
		pw.Close()
	}()
	rest, err := io.ReadAll(&s)
	if err != nil || string(rest) != stars("sk-abcdefghijklmnopqrstuvwxyz")+"\n\n" {
		t.Fatalf("rest = %q, %v", rest, err)
	}
}

func TestScrubReaderErrors(t *testing.T) {
	red := newRedactor([]string{"secret-value"})
	boom := errors.New("boom")
	r := iotest.DataErrReader(io.MultiReader(strings.NewReader("a secret-value b secret-"), iotest.ErrReader(boom)))
	var s scrubReader
	s.reset(r, red)
	got, err := io.ReadAll(&s)
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if want := "a " + stars("secret-value") + " b secret-"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if _, err := s.Read(make([]byte, 8)); !errors.Is(err, boom) {
		t.Errorf("error not sticky: %v", err)
	}
}

// TestRedactorForms: the forms cover the encodings an echo server may use.
func TestRedactorForms(t *testing.T) {
	const key = "sk-proj/A+b<c>&d_e-0123456789"
	red := newRedactor([]string{key})
	j, _ := json.Marshal(key)
	echoes := []string{
		key,
		string(j[1 : len(j)-1]),            // Go
		strings.ReplaceAll(key, "/", `\/`), // PHP, with HTML characters raw
	}
	for _, prefix := range []string{"", "B", "Be", "Bearer ", "user:"} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			echoes = append(echoes, enc.EncodeToString([]byte(prefix+key+"\n")))
		}
	}
	for _, e := range echoes {
		out := maskNaive([]byte(e), red.forms)
		if strings.Count(string(out), "*") < len(key)-8 {
			t.Errorf("echo %q masked as %q", e, out)
		}
	}
	if newRedactor(nil) != nil || newRedactor([]string{""}) != nil {
		t.Error("a redactor without values")
	}
	// A short value has no base64 forms (they would match ordinary text).
	if r := newRedactor([]string{"short"}); len(r.forms) != 1 {
		t.Errorf("forms of a short value: %q", r.forms)
	}
}

func TestScrubHeader(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	red := newRedactor([]string{key})
	h := http.Header{
		"X-Echo-Authorization": {"Bearer " + key},
		"X-" + key:             {"1"},
		"Content-Type":         {"application/json"},
	}
	red.scrubHeader(h)
	want := http.Header{
		"X-Echo-Authorization": {"Bearer " + stars(key)},
		"X-" + stars(key):      {"1"},
		"Content-Type":         {"application/json"},
	}
	if head, wantHead := appendHTTPHead(nil, 200, h), appendHTTPHead(nil, 200, want); !bytes.Equal(head, wantHead) {
		t.Errorf("head %s, want %s", head, wantHead)
	}
}

func TestLeaks(t *testing.T) {
	var cs callState
	if cs.leaks([]byte("anything")) {
		t.Error("leak without a secret")
	}
	a, b := newRedactor([]string{"key-a/1"}), newRedactor([]string{"key-b"})
	cs.secrets.add(a)
	cs.secrets.add(a)
	cs.secrets.add(b)
	cs.secrets.add(nil)
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{"text":"fine"}`, false},
		{`{"text":"key-a/1"}`, true},
		{`{"text":"key-a\/1"}`, true},
		{`{"text":"x key-b y"}`, true},
		{`{"text":"key-"}`, false},
	} {
		if got := cs.leaks([]byte(tc.in)); got != tc.want {
			t.Errorf("leaks(%s) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if len(cs.secrets.more) != 1 {
		t.Errorf("set holds %d extra redactors, want 1", len(cs.secrets.more))
	}
	if !cs.leaked([]byte("key-b")) || cs.violation == "" || strings.Contains(cs.violation, "key-b") {
		t.Errorf("violation %q", cs.violation)
	}
}

// FuzzScrubReader: however the input is split by the network and by the
// reader's buffers, the output is the input with every occurrence of the
// secret's forms masked; for a secret that cannot overlap itself that is
// strings.ReplaceAll with same-length masks.
func FuzzScrubReader(f *testing.F) {
	f.Add([]byte("hello world, the key is here: and there"), "sk-0123456789abcdefgh", uint64(1))
	f.Add([]byte("data: {\"echo\":\"\"}\n\n"), "abab", uint64(7))
	f.Add([]byte(""), "k", uint64(0))
	f.Fuzz(func(t *testing.T, text []byte, secret string, seed uint64) {
		if secret == "" || !validHeaderValue(secret) || len(text) > 4096 || len(secret) > 256 {
			return
		}
		rng := rand.New(rand.NewPCG(seed, seed>>7))
		// Insert the secret at random positions.
		in := bytes.Clone(text)
		for range rng.IntN(4) {
			i := rng.IntN(len(in) + 1)
			in = append(in[:i], append([]byte(secret), in[i:]...)...)
		}
		sizes := make([]int, 1+rng.IntN(8))
		for i := range sizes {
			sizes[i] = 1 + rng.IntN(len(secret)+8)
		}
		bufs := make([]int, 1+rng.IntN(8))
		for i := range bufs {
			bufs[i] = 1 + rng.IntN(2*len(secret)+8)
		}
		red := newRedactor([]string{secret})
		got := readScrubbed(t, &chunkReader{src: in, sizes: sizes}, red, bufs)
		if want := maskNaive(in, red.forms); !bytes.Equal(got, want) {
			t.Fatalf("chunks %v reads %v:\n got %q\nwant %q", sizes, bufs, got, want)
		}
		if len(red.forms) == 1 && !selfOverlaps(secret) {
			if want := strings.ReplaceAll(string(in), secret, stars(secret)); string(got) != want {
				t.Fatalf("got %q, want ReplaceAll %q", got, want)
			}
		}
	})
}

// BenchmarkScrubReader: the cost of masking an OpenAI-like stream (300-byte
// events) with one key, read the way the SSE reader reads it.
func BenchmarkScrubReader(b *testing.B) {
	chunk := `data: {"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"content":" the quick brown"},"logprobs":null,"finish_reason":null}]}` + "\n\n"
	stream := []byte(strings.Repeat(chunk, 100))
	for _, tc := range []struct {
		name string
		red  *redactor
	}{
		{"none", nil},
		{"short-key", newRedactor([]string{"sk-short"})},
		{"key", newRedactor([]string{"sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUV"})},
	} {
		b.Run(tc.name, func(b *testing.B) {
			buf := make([]byte, 4096)
			b.SetBytes(int64(len(stream)))
			var s scrubReader
			for b.Loop() {
				var r io.Reader = bytes.NewReader(stream)
				if tc.red != nil {
					s.reset(r, tc.red)
					r = &s
				}
				for {
					if _, err := r.Read(buf); err != nil {
						break
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100), "ns/event")
		})
	}
}
