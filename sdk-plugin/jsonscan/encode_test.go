package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestAppendQuote(t *testing.T) {
	for _, s := range []string{
		"", "plain", `"quoted" \ back`, "ctl\x00\x01\x08\x0c\x1f\x7f\n\r\t", "é世界😀", "bad\xff\xfe utf8 \xe4\xb8",
		"<&>\u2028\u2029", strings.Repeat("long plain run ", 10) + "\"", "\xed\xa0\x80", "1234567\"",
	} {
		got := AppendQuote([]byte("x"), s)
		if got[0] != 'x' {
			t.Fatalf("prefix lost: %q", got)
		}
		checkQuote(t, s, got[1:])
	}
}

// checkQuote checks that q decodes to what json.Marshal(s) decodes to.
func checkQuote(t *testing.T, s string, q []byte) {
	t.Helper()
	var got, want string
	if err := json.Unmarshal(q, &got); err != nil {
		t.Fatalf("AppendQuote(%q) = %s: %v", s, q, err)
	}
	m, _ := json.Marshal(s)
	if err := json.Unmarshal(m, &want); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("AppendQuote(%q) = %s decodes to %q, want %q", s, q, got, want)
	}
	if !Valid(q) {
		t.Fatalf("AppendQuote(%q) = %s: not valid per jsonscan", s, q)
	}
}

func TestAppendCompact(t *testing.T) {
	for _, raw := range []string{
		`{}`, ` { "a" : [ 1 , 2 ] , "b\" c" : " x  y " } `, "[\n\t1,\r\n2]", `"s"`, `null`, `{"a":1}`,
		`{"a":`, `{} {}`, ``, ` `, `[1,]`,
	} {
		var want bytes.Buffer
		werr := json.Compact(&want, []byte(raw))
		got, gerr := AppendCompact([]byte("x"), []byte(raw))
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("AppendCompact(%q) err = %v, json.Compact %v", raw, gerr, werr)
		}
		if werr != nil {
			if string(got) != "x" {
				t.Errorf("AppendCompact(%q) changed dst on error: %q", raw, got)
			}
			continue
		}
		if string(got) != "x"+want.String() {
			t.Errorf("AppendCompact(%q) = %q, want %q", raw, got[1:], want.String())
		}
	}
}

func FuzzEncode(f *testing.F) {
	for _, s := range []string{`{"a": [1, "b c"]}`, "x\x00\xff\"\\", "é \t\n", `[`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkQuote(t, s, AppendQuote(nil, s))
		var want bytes.Buffer
		werr := json.Compact(&want, []byte(s))
		got, gerr := AppendCompact(nil, []byte(s))
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("AppendCompact(%q) err = %v, json.Compact %v", s, gerr, werr)
		}
		if werr == nil && !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("AppendCompact(%q) = %q, want %q", s, got, want.Bytes())
		}
	})
}
