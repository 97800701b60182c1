package attachments

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"

	"adhost/runtime/attachments/sourceuri"
	"adhost/runtime/protocol"
)

// Schema bounds of wire-context §2. String lengths are UTF-16 units.
const (
	MaxItems         = 16
	maxTextUnits     = 1_000_000
	maxDataUnits     = 44_739_244 // base64 of 32 MiB
	maxTitleUnits    = 256
	maxURIUnits      = 2_048
	maxSectionUnits  = 256
	maxLocationValue = 1_000_000
	maxNameUnits     = 128
)

// Media types of wire-context §1.2.
const (
	TypePlain    = "text/plain"
	TypeMarkdown = "text/markdown"
	TypePNG      = "image/png"
	TypeJPEG     = "image/jpeg"
	TypeWEBP     = "image/webp"
	TypePDF      = "application/pdf"
	TypeJSON     = "application/json" // artifacts only
)

// MediaTypes are the six context media types in spec order.
var MediaTypes = []string{TypePlain, TypeMarkdown, TypePNG, TypeJPEG, TypeWEBP, TypePDF}

// Item is one decoded attachments entry.
type Item struct {
	Type      string // "text" | "image" | "pdf" | "reference"
	MediaType string
	Source    Source // inline items
	Text      string // text items
	Data      string // image and pdf items: base64 as sent
	// ID and Revision name a reference's stored document.
	ID, Revision string
}

// Source is a ContextSource (wire-context §2.1).
type Source struct {
	ID, Revision string
	Title, URI   *string
	Location     *Location
}

// Location is a source's optional location; nil fields are absent.
type Location struct {
	DocumentID, ThreadID, MessageID   *string
	Page, PageEnd, StartLine, EndLine *int
	Section                           *string
}

// Artifact is a decoded outputArtifact.
type Artifact struct {
	Name, MediaType string
}

var errSchema = errors.New("does not match the schema")

// schemaError is the one INVALID_REQUEST of a malformed field; why is
// private and names no value.
func schemaError(why string) error {
	return protocol.Wrap(protocol.CodeInvalidRequest, errors.New("attachments: "+why))
}

// object decodes raw as a JSON object with exact, case-sensitive member
// names (the last duplicate wins, as JSON.parse) and refuses any member
// outside allowed.
func object(raw json.RawMessage, allowed ...string) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errSchema
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, errSchema
	}
	for k := range m {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
				break
			}
		}
		if !ok {
			return nil, errSchema
		}
	}
	return m, nil
}

// str decodes a JSON string (null and other kinds fail) of at most max
// UTF-16 units; min is 1 when the schema forbids the empty string.
func str(raw json.RawMessage, min, max int) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", errSchema
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", errSchema
	}
	if n := protocol.UTF16Len(s); n < min || n > max {
		return "", errSchema
	}
	return s, nil
}

// integer decodes an integral JSON number in [min, max]; 8.0 counts as 8,
// as with a double parser.
func integer(raw json.RawMessage, min, max int) (int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, errSchema
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f != math.Trunc(f) || f < float64(min) || f > float64(max) {
		return 0, errSchema
	}
	return int(f), nil
}

// IsSourceID reports whether s matches ^[a-zA-Z0-9][a-zA-Z0-9._:-]{0,127}$.
func IsSourceID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != ':' && c != '-')) {
			return false
		}
	}
	return true
}

func sourceID(raw json.RawMessage) (string, error) {
	s, err := str(raw, 1, 128)
	if err != nil || !IsSourceID(s) {
		return "", errSchema
	}
	return s, nil
}

func decodeSource(raw json.RawMessage) (Source, error) {
	var src Source
	m, err := object(raw, "id", "revision", "title", "uri", "location")
	if err != nil {
		return src, err
	}
	if src.ID, err = sourceID(m["id"]); err != nil {
		return src, err
	}
	if src.Revision, err = sourceID(m["revision"]); err != nil {
		return src, err
	}
	if v, ok := m["title"]; ok {
		s, err := str(v, 0, maxTitleUnits)
		if err != nil {
			return src, err
		}
		src.Title = &s
	}
	if v, ok := m["uri"]; ok {
		s, err := str(v, 0, maxURIUnits)
		if err != nil || !sourceuri.Schema(s) {
			return src, errSchema
		}
		src.URI = &s
	}
	if v, ok := m["location"]; ok {
		if src.Location, err = decodeLocation(v); err != nil {
			return src, err
		}
	}
	return src, nil
}

func decodeLocation(raw json.RawMessage) (*Location, error) {
	m, err := object(raw, "documentId", "threadId", "messageId", "page", "pageEnd", "startLine", "endLine", "section")
	if err != nil {
		return nil, err
	}
	loc := &Location{}
	for _, f := range []struct {
		name string
		dst  **string
	}{{"documentId", &loc.DocumentID}, {"threadId", &loc.ThreadID}, {"messageId", &loc.MessageID}} {
		if v, ok := m[f.name]; ok {
			s, err := sourceID(v)
			if err != nil {
				return nil, err
			}
			*f.dst = &s
		}
	}
	for _, f := range []struct {
		name string
		dst  **int
	}{{"page", &loc.Page}, {"pageEnd", &loc.PageEnd}, {"startLine", &loc.StartLine}, {"endLine", &loc.EndLine}} {
		if v, ok := m[f.name]; ok {
			n, err := integer(v, 1, maxLocationValue)
			if err != nil {
				return nil, err
			}
			*f.dst = &n
		}
	}
	if v, ok := m["section"]; ok {
		s, err := str(v, 0, maxSectionUnits)
		if err != nil {
			return nil, err
		}
		loc.Section = &s
	}
	return loc, nil
}

// DecodeItems decodes an attachments array with the strict schema of
// wire-context §2.2. Every failure is INVALID_REQUEST.
func DecodeItems(raw json.RawMessage) ([]Item, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return nil, schemaError("not an array")
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(raw, &elems); err != nil {
		return nil, schemaError("not an array")
	}
	if len(elems) > MaxItems {
		return nil, schemaError("more than 16 items")
	}
	items := make([]Item, 0, len(elems))
	for _, e := range elems {
		it, err := decodeItem(e)
		if err != nil {
			return nil, schemaError("an item does not match its variant")
		}
		items = append(items, it)
	}
	return items, nil
}

func decodeItem(raw json.RawMessage) (Item, error) {
	var it Item
	m, err := object(raw, "type", "source", "mediaType", "text", "data", "id", "revision")
	if err != nil {
		return it, err
	}
	if it.Type, err = str(m["type"], 1, 16); err != nil {
		return it, err
	}
	if it.MediaType, err = str(m["mediaType"], 1, 32); err != nil {
		return it, err
	}
	// The variant decides the exact member set: all required, no other.
	var want []string
	switch it.Type {
	case "text":
		want = []string{"type", "source", "mediaType", "text"}
		if it.MediaType != TypePlain && it.MediaType != TypeMarkdown {
			return it, errSchema
		}
	case "image":
		want = []string{"type", "source", "mediaType", "data"}
		if it.MediaType != TypePNG && it.MediaType != TypeJPEG && it.MediaType != TypeWEBP {
			return it, errSchema
		}
	case "pdf":
		want = []string{"type", "source", "mediaType", "data"}
		if it.MediaType != TypePDF {
			return it, errSchema
		}
	case "reference":
		want = []string{"type", "id", "revision", "mediaType"}
		if !isMediaType(it.MediaType) {
			return it, errSchema
		}
	default:
		return it, errSchema
	}
	if len(m) != len(want) {
		return it, errSchema
	}
	for _, k := range want {
		if _, ok := m[k]; !ok {
			return it, errSchema
		}
	}
	switch it.Type {
	case "text":
		it.Text, err = str(m["text"], 1, maxTextUnits)
	case "image", "pdf":
		it.Data, err = str(m["data"], 1, maxDataUnits)
	case "reference":
		if it.ID, err = sourceID(m["id"]); err == nil {
			it.Revision, err = sourceID(m["revision"])
		}
		return it, err
	}
	if err != nil {
		return it, err
	}
	it.Source, err = decodeSource(m["source"])
	return it, err
}

func isMediaType(s string) bool {
	for _, t := range MediaTypes {
		if s == t {
			return true
		}
	}
	return false
}

// DecodeArtifact decodes an outputArtifact object (wire-context §2.3).
// Every failure is INVALID_REQUEST; "." and ".." pass (INVALID_ARTIFACT is
// a semantic check).
func DecodeArtifact(raw json.RawMessage) (*Artifact, error) {
	m, err := object(raw, "name", "mediaType")
	if err != nil || len(m) != 2 {
		return nil, schemaError("outputArtifact is not {name, mediaType}")
	}
	var a Artifact
	if a.Name, err = str(m["name"], 1, maxNameUnits); err != nil || strings.ContainsFunc(a.Name, func(r rune) bool {
		return r == '/' || r == '\\' || r < 0x20
	}) {
		return nil, schemaError("outputArtifact name")
	}
	if a.MediaType, err = str(m["mediaType"], 1, 32); err != nil ||
		(a.MediaType != TypePlain && a.MediaType != TypeMarkdown && a.MediaType != TypeJSON) {
		return nil, schemaError("outputArtifact mediaType")
	}
	return &a, nil
}
