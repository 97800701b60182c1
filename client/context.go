package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"

	"adhost/runtime/attachments/sourceuri"
	"adhost/runtime/protocol"
)

// Selected context on the client side (wire-context §8, §9): the checks
// a client applies to result.sources and result.artifacts, and helpers to
// attach files and ask for a draft artifact.

var (
	sourceIDPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._:-]{0,127}$`)
	digestPattern   = regexp.MustCompile(`^[a-f0-9]{64}$`)
	uuidPattern     = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	contextMedia    = set("text/plain", "text/markdown", "image/png", "image/jpeg", "image/webp", "application/pdf")
	artifactMedia   = set("text/plain", "text/markdown", "application/json")
	sourceOrigins   = set("inline", "reference", "retrieval")
)

// validateContextResult checks result.sources and result.artifacts when
// present (absent is fine; null or anything else is INVALID_STREAM /
// INVALID_RESPONSE at the caller) and keeps them, compact, in r.
func validateContextResult(m object, r *protocol.RunResult) error {
	ids := map[string]bool{}
	if raw, present := m["sources"]; present {
		items, ok := asArray(raw)
		if !ok || len(items) > 16 {
			return fieldError("result.sources is not an array of at most 16")
		}
		for _, it := range items {
			id, err := validateSource(it)
			if err != nil {
				return err
			}
			if ids[id] {
				return fieldError("result.sources has a duplicate id")
			}
			ids[id] = true
		}
		r.Sources = compact(raw)
	}
	if raw, present := m["artifacts"]; present {
		items, ok := asArray(raw)
		if !ok || len(items) > 1 {
			return fieldError("result.artifacts is not an array of at most one")
		}
		for _, it := range items {
			if err := validateArtifact(it, ids); err != nil {
				return err
			}
		}
		r.Artifacts = compact(raw)
	}
	return nil
}

func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

func onlyKeys(o object, allowed ...string) bool {
	for k := range o {
		if !contains(allowed, k) {
			return false
		}
	}
	return true
}

// validateSource checks one manifest entry and returns its id.
func validateSource(raw json.RawMessage) (string, error) {
	o, ok := asObject(raw)
	if !ok || !onlyKeys(o, "id", "revision", "title", "uri", "location", "mediaType", "bytes", "sha256", "origin", "expiresAt") {
		return "", fieldError("result.sources entry is not a strict object")
	}
	id, ok1 := asString(o["id"])
	rev, ok2 := asString(o["revision"])
	if !ok1 || !ok2 || !sourceIDPattern.MatchString(id) || !sourceIDPattern.MatchString(rev) {
		return "", fieldError("result.sources entry has an invalid id or revision")
	}
	if media, ok := asString(o["mediaType"]); !ok || !contextMedia[media] {
		return "", fieldError("result.sources entry has an invalid mediaType")
	}
	if n, ok := asSafeInt(o["bytes"]); !ok || n < 1 || n > 33_554_432 {
		return "", fieldError("result.sources entry has invalid bytes")
	}
	if d, ok := asString(o["sha256"]); !ok || !digestPattern.MatchString(d) {
		return "", fieldError("result.sources entry has an invalid sha256")
	}
	if origin, ok := asString(o["origin"]); !ok || !sourceOrigins[origin] {
		return "", fieldError("result.sources entry has an invalid origin")
	}
	if raw, present := o["title"]; present {
		if s, ok := asString(raw); !ok || utf16Len(s) > 256 {
			return "", fieldError("result.sources entry has an invalid title")
		}
	}
	if raw, present := o["uri"]; present {
		s, ok := asString(raw)
		if !ok || !validSourceURI(s) {
			return "", fieldError("result.sources entry has an invalid uri")
		}
	}
	if raw, present := o["location"]; present {
		if err := validateLocation(raw); err != nil {
			return "", err
		}
	}
	if raw, present := o["expiresAt"]; present {
		if _, ok := asTimestamp(raw); !ok {
			return "", fieldError("result.sources entry has an invalid expiresAt")
		}
	}
	return id, nil
}

// validSourceURI is the uri rule: at most 2,048 characters, https or app
// with no JavaScript whitespace, an absolute URL without a user name or
// password (the host's own rules, runtime/attachments/sourceuri).
func validSourceURI(s string) bool {
	return utf16Len(s) <= 2048 && sourceuri.Schema(s) && sourceuri.Plain(s)
}

func validateLocation(raw json.RawMessage) error {
	bad := fieldError("result.sources entry has an invalid location")
	o, ok := asObject(raw)
	if !ok || !onlyKeys(o, "documentId", "threadId", "messageId", "page", "pageEnd", "startLine", "endLine", "section") {
		return bad
	}
	for _, k := range []string{"documentId", "threadId", "messageId"} {
		if v, present := o[k]; present {
			if s, ok := asString(v); !ok || !sourceIDPattern.MatchString(s) {
				return bad
			}
		}
	}
	nums := map[string]int64{}
	for _, k := range []string{"page", "pageEnd", "startLine", "endLine"} {
		if v, present := o[k]; present {
			n, ok := asSafeInt(v)
			if !ok || n < 1 || n > 1_000_000 {
				return bad
			}
			nums[k] = n
		}
	}
	if v, present := o["section"]; present {
		if s, ok := asString(v); !ok || utf16Len(s) > 256 {
			return bad
		}
	}
	for _, p := range [][2]string{{"page", "pageEnd"}, {"startLine", "endLine"}} {
		if end, ok := nums[p[1]]; ok {
			if start, ok := nums[p[0]]; !ok || end < start {
				return bad
			}
		}
	}
	return nil
}

// validateArtifact checks the draft artifact against the sources' ids.
func validateArtifact(raw json.RawMessage, ids map[string]bool) error {
	bad := func(what string) error { return fieldError("result.artifacts entry: " + what) }
	o, ok := asObject(raw)
	if !ok || !onlyKeys(o, "name", "mediaType", "id", "status", "content", "sha256", "sourceIds") {
		return bad("not a strict object")
	}
	name, ok := asString(o["name"])
	if !ok || name == "" || name == "." || name == ".." || utf16Len(name) > 128 || strings.ContainsFunc(name, func(r rune) bool {
		return r == '/' || r == '\\' || r < 0x20
	}) {
		return bad("invalid name")
	}
	if media, ok := asString(o["mediaType"]); !ok || !artifactMedia[media] {
		return bad("invalid mediaType")
	}
	if id, ok := asString(o["id"]); !ok || !uuidPattern.MatchString(id) {
		return bad("invalid id")
	}
	if status, ok := asString(o["status"]); !ok || status != "draft" {
		return bad("status is not draft")
	}
	if content, ok := asString(o["content"]); !ok || len(content) > 262_144 {
		return bad("invalid content")
	}
	if d, ok := asString(o["sha256"]); !ok || !digestPattern.MatchString(d) {
		return bad("invalid sha256")
	}
	srcIDs, ok := asStringArray(o["sourceIds"])
	if !ok || len(srcIDs) > 16 {
		return bad("invalid sourceIds")
	}
	seen := map[string]bool{}
	for _, id := range srcIDs {
		if seen[id] || !ids[id] {
			return bad("sourceIds names an id not in sources")
		}
		seen[id] = true
	}
	return nil
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// FileAttachment is one attachments item for a file's content: the media
// type comes from the content's signature (PNG, JPEG, WEBP, PDF), valid
// UTF-8 is text/plain, anything else is refused. The source id is the
// file's base name made a SourceId, the revision the content's SHA-256.
func FileAttachment(name string, content []byte) (json.RawMessage, error) {
	media := sniffMedia(content)
	if media == "" {
		return nil, fmt.Errorf("%s: not text, PNG, JPEG, WEBP or PDF", name)
	}
	sum := sha256.Sum256(content)
	src := map[string]string{"id": SourceID(filepath.Base(name)), "revision": hex.EncodeToString(sum[:])}
	item := map[string]any{"source": src, "mediaType": media}
	switch {
	case strings.HasPrefix(media, "text/"):
		item["type"], item["text"] = "text", string(content)
	case media == "application/pdf":
		item["type"], item["data"] = "pdf", base64.StdEncoding.EncodeToString(content)
	default:
		item["type"], item["data"] = "image", base64.StdEncoding.EncodeToString(content)
	}
	return json.Marshal(item)
}

// SourceID maps a name to the SourceId pattern: unsupported characters
// become '-', a leading non-alphanumeric gets an 'f' before it, and the
// result is cut at 128 bytes.
func SourceID(name string) string {
	b := []byte(name)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-'
		if !ok {
			b[i] = '-'
		}
	}
	s := string(b)
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z' || s[0] >= '0' && s[0] <= '9') {
		s = "f" + s
	}
	if len(s) > 128 {
		s = s[:128]
	}
	return s
}

func sniffMedia(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte{0xFF, 0xD8, 0xFF}):
		return "image/jpeg"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "image/webp"
	case bytes.HasPrefix(b, []byte("%PDF-")):
		return "application/pdf"
	case len(b) > 0 && utf8.Valid(b):
		return "text/plain"
	}
	return ""
}

// FileAttachments reads each named file and returns the attachments
// array for them (nil for no names); a base name used twice gets "-2",
// "-3" … so that source ids stay unique within the run.
func FileAttachments(names []string, read func(string) ([]byte, error)) (json.RawMessage, error) {
	if len(names) == 0 {
		return nil, nil
	}
	used := map[string]int{}
	items := make([]json.RawMessage, 0, len(names))
	for _, name := range names {
		b, err := read(name)
		if err != nil {
			return nil, err
		}
		base := filepath.Base(name)
		id := SourceID(base)
		if used[id]++; used[id] > 1 {
			base = fmt.Sprintf("%s-%d", base, used[id])
		}
		item, err := FileAttachment(base, b)
		if err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	return json.Marshal(items)
}

// OutputArtifact is the outputArtifact of one kind: "markdown"
// (artifact.md), "text" (artifact.txt) or "json" (artifact.json, which
// needs an outputSchema); "" is none.
func OutputArtifact(kind string) (json.RawMessage, error) {
	var name, media string
	switch kind {
	case "":
		return nil, nil
	case "markdown":
		name, media = "artifact.md", "text/markdown"
	case "text":
		name, media = "artifact.txt", "text/plain"
	case "json":
		name, media = "artifact.json", "application/json"
	default:
		return nil, fmt.Errorf("artifact kind %q is not markdown, text or json", kind)
	}
	return json.Marshal(map[string]string{"name": name, "mediaType": media})
}

// Artifact is a result's draft artifact (wire-context §9).
type Artifact struct {
	Name      string   `json:"name"`
	MediaType string   `json:"mediaType"`
	ID        string   `json:"id"`
	Status    string   `json:"status"`
	Content   string   `json:"content"`
	SHA256    string   `json:"sha256"`
	SourceIDs []string `json:"sourceIds"`
}

// ResultArtifacts decodes res.Artifacts (validated when the result was
// read); nil without an artifact.
func ResultArtifacts(res *protocol.RunResult) ([]Artifact, error) {
	if len(res.Artifacts) == 0 {
		return nil, nil
	}
	var out []Artifact
	err := json.Unmarshal(res.Artifacts, &out)
	return out, err
}
