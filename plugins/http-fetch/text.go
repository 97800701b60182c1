package main

import (
	"html"
	"strings"
	"unicode/utf8"
)

// Text reduces an HTML document to its readable text: tags dropped,
// comments, scripts, styles and other non-content elements skipped,
// character references decoded, whitespace collapsed, and a line break
// where a block element starts or ends. It is a reducer, not a parser: it
// never fails and runs in one pass over the input.
func Text(doc string) string {
	doc = strings.ToValidUTF8(doc, "\uFFFD")
	var out strings.Builder
	out.Grow(len(doc) / 2)
	w := textWriter{b: &out}
	for i := 0; i < len(doc); {
		lt := strings.IndexByte(doc[i:], '<')
		if lt < 0 {
			w.text(doc[i:])
			break
		}
		w.text(doc[i : i+lt])
		i += lt
		switch {
		case strings.HasPrefix(doc[i:], "<!--"):
			end := strings.Index(doc[i+4:], "-->")
			if end < 0 {
				return w.done()
			}
			i += 4 + end + 3
			continue
		case strings.HasPrefix(doc[i:], "<!") || strings.HasPrefix(doc[i:], "<?"):
			i = skipTag(doc, i)
			continue
		}
		name, closing, ok := tagName(doc, i)
		if !ok {
			w.text("<") // a lone '<' is text
			i++
			continue
		}
		i = skipTag(doc, i)
		if !closing && skipped[name] {
			i = skipElement(doc, i, name)
			continue
		}
		if block[name] {
			w.breakLine()
		}
	}
	return w.done()
}

// skipped are elements whose content is not text a reader sees.
var skipped = map[string]bool{
	"script": true, "style": true, "noscript": true, "template": true, "svg": true,
	"math": true, "iframe": true, "object": true, "canvas": true,
}

// block are elements that start a new line.
var block = map[string]bool{
	"address": true, "article": true, "aside": true, "blockquote": true, "br": true, "dd": true,
	"div": true, "dl": true, "dt": true, "fieldset": true, "figcaption": true, "figure": true,
	"footer": true, "form": true, "h1": true, "h2": true, "h3": true, "h4": true, "h5": true,
	"h6": true, "header": true, "hr": true, "li": true, "main": true, "nav": true, "ol": true,
	"p": true, "pre": true, "section": true, "table": true, "td": true, "th": true, "title": true,
	"tr": true, "ul": true, "body": true, "head": true, "html": true,
}

// tagName reads the name of the tag starting at doc[i] == '<'.
func tagName(doc string, i int) (name string, closing, ok bool) {
	j := i + 1
	if j < len(doc) && doc[j] == '/' {
		closing = true
		j++
	}
	start := j
	for j < len(doc) && (isLetter(doc[j]) || (j > start && isDigit(doc[j]))) {
		j++
	}
	if j == start {
		return "", false, false
	}
	return strings.ToLower(doc[start:j]), closing, true
}

// skipTag returns the index after the '>' that ends the tag at doc[i],
// honouring quoted attribute values (or len(doc)).
func skipTag(doc string, i int) int {
	var quote byte
	for j := i + 1; j < len(doc); j++ {
		c := doc[j]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '>':
			return j + 1
		}
	}
	return len(doc)
}

// skipElement returns the index after the end tag of name (or len(doc)).
func skipElement(doc string, i int, name string) int {
	for {
		lt := strings.Index(doc[i:], "</")
		if lt < 0 {
			return len(doc)
		}
		i += lt
		if n, closing, ok := tagName(doc, i); ok && closing && n == name {
			return skipTag(doc, i)
		}
		i += 2
	}
}

func isLetter(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }
func isDigit(c byte) bool  { return '0' <= c && c <= '9' }

// textWriter collapses whitespace: a run of spaces is one space, line
// breaks at most one blank line, none at the start or the end.
type textWriter struct {
	b      *strings.Builder
	space  bool // a space is pending
	breaks int  // line breaks pending (0..2)
}

func (w *textWriter) text(s string) {
	if s == "" {
		return
	}
	if strings.IndexByte(s, '&') >= 0 {
		s = html.UnescapeString(s)
	}
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		s = s[n:]
		switch r {
		case ' ', '\t', '\n', '\r', '\f', '\u00a0':
			w.space = true
			continue
		}
		if w.b.Len() > 0 {
			switch {
			case w.breaks > 0:
				w.b.WriteString("\n\n"[:w.breaks])
			case w.space:
				w.b.WriteByte(' ')
			}
		}
		w.space, w.breaks = false, 0
		w.b.WriteRune(r)
	}
}

func (w *textWriter) breakLine() {
	w.breaks = min(w.breaks+1, 2)
}

func (w *textWriter) done() string { return w.b.String() }
