package sourceuri

import "testing"

// TestIsJSSpace: exactly ECMAScript's WhiteSpace and LineTerminator code
// points (the \s class and what trim removes), nothing else.
func TestIsJSSpace(t *testing.T) {
	js := map[rune]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true, 0xA0: true, 0x1680: true,
		0x2028: true, 0x2029: true, 0x202F: true, 0x205F: true, 0x3000: true, 0xFEFF: true}
	for r := rune(0x2000); r <= 0x200A; r++ {
		js[r] = true
	}
	for r := rune(0); r <= 0x10000; r++ {
		if IsJSSpace(r) != js[r] {
			t.Errorf("IsJSSpace(%U) = %v", r, IsJSSpace(r))
		}
	}
}

func TestSchemaAndPlain(t *testing.T) {
	for s, want := range map[string][2]bool{
		"https://example.com/a":       {true, true},
		"app://library/study-4":       {true, true},
		"https://@host/x":             {true, true},
		"https://name:secret@host/x":  {true, false},
		"https://name@host/x":         {true, false},
		"https://a\u00a0b":            {false, true},
		"https://a\x01b":              {true, false},
		"http://example.com":          {false, true},
		"https://":                    {false, true}, // the pattern refuses it
		"HTTPS://example.com":         {false, true},
		"file:///etc/passwd":          {false, true},
		"https://example.com/\u00e9 ": {false, true},
	} {
		if got := [2]bool{Schema(s), Plain(s)}; got != want {
			t.Errorf("%q: Schema, Plain = %v, want %v", s, got, want)
		}
	}
}
