package main

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		`<p>Hello, <b>world</b>!</p>`: "Hello, world!",
		`<html><head><title>T</title><style>p{color:red}</style><script>alert("<p>x</p>")</script></head><body><h1>Head</h1><p>One&amp;two &lt;three&gt; &#x263A;</p><!-- hidden <p>no</p> --><ul><li>a</li><li>b</li></ul></body></html>`: "T\n\nHead\n\nOne&two <three> ☺\n\na\n\nb",
		"a  \n\t b":       "a b",
		`x < y and y > z`: "x < y and y > z",
		`<a href="x>y" title='a>b'>link</a> text`:        "link text",
		`line<br>break<br/>again`:                        "line\nbreak\nagain",
		`<SCRIPT type="x">var a = "</p>";</SCRIPT>after`: "after",
		`<script>never closed`:                           "",
		`<!-- never closed`:                              "",
		`<!DOCTYPE html><p>x</p>`:                        "x",
		"\xff<p>bad utf8</p>":                            "\uFFFD\nbad utf8",
		`&nbsp;spaced&nbsp;out&nbsp;`:                    "spaced out",
		``:                                               "",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%.60q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzText: any input reduces to valid UTF-8 without tags it saw as tags,
// never longer than the input's text could make it.
func FuzzText(f *testing.F) {
	for _, s := range []string{`<p>a</p>`, `<script>x</script>y`, `<!--`, `<a b="<">c</a>`, `&amp;&#0;&#xD800;`, `</`, `<<p>>`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := Text(in)
		if !utf8.ValidString(out) {
			t.Fatalf("Text(%q) = %q: not UTF-8", in, out)
		}
		if len(out) > 3*len(in)+8 {
			t.Fatalf("Text(%q) grew to %d bytes", in, len(out))
		}
		if strings.HasPrefix(out, " ") || strings.HasPrefix(out, "\n") {
			t.Fatalf("Text(%q) = %q starts with whitespace", in, out)
		}
	})
}
