package config

import (
	"fmt"
	"slices"
	"strings"
)

// The selected-context keys (wire-context §1.3, host-config):
//
//	[context] max_bytes       1..33554432, default 8388608: all decoded
//	                          context of one run
//	[context] max_text_bytes  1..1000000, default 1000000: text items only
//	[[providers]] input_media_types = { "model" = ["image/png", …] }
//	                          the non-text types each model accepts
//
// A model without an input_media_types entry is text-only. Whether the
// provider's extension can carry a listed type is known only from its
// manifest; MediaTypeError words that start-up refusal like the rest.

// Context is [context]; nil when absent (the defaults).
type Context struct {
	MaxBytes     int `toml:"max_bytes"`
	MaxTextBytes int `toml:"max_text_bytes"`
}

// Context bounds (wire-context §1.3).
const (
	DefaultContextMaxBytes     = 8_388_608
	MaxContextMaxBytes         = 33_554_432
	DefaultContextMaxTextBytes = 1_000_000
	MaxContextMaxTextBytes     = 1_000_000
	maxMediaModels             = 1000
)

// ContextMediaTypes are the media types input_media_types may list.
var ContextMediaTypes = []string{"text/plain", "text/markdown", "image/png", "image/jpeg", "image/webp", "application/pdf"}

// ContextBudgets returns [context]'s budgets with defaults applied.
func (f *File) ContextBudgets() (maxBytes, maxTextBytes int) {
	maxBytes, maxTextBytes = DefaultContextMaxBytes, DefaultContextMaxTextBytes
	if c := f.Context; c != nil {
		if c.MaxBytes != 0 {
			maxBytes = c.MaxBytes
		}
		if c.MaxTextBytes != 0 {
			maxTextBytes = c.MaxTextBytes
		}
	}
	return maxBytes, maxTextBytes
}

func (f *File) validateContext(p *problems) {
	if c := f.Context; c != nil {
		if _, set := f.pos["context.max_bytes"]; set || c.MaxBytes != 0 {
			if c.MaxBytes < 1 || c.MaxBytes > MaxContextMaxBytes {
				p.add("context.max_bytes", "%d out of range 1..%d", c.MaxBytes, MaxContextMaxBytes)
			}
		}
		if _, set := f.pos["context.max_text_bytes"]; set || c.MaxTextBytes != 0 {
			if c.MaxTextBytes < 1 || c.MaxTextBytes > MaxContextMaxTextBytes {
				p.add("context.max_text_bytes", "%d out of range 1..%d", c.MaxTextBytes, MaxContextMaxTextBytes)
			}
		}
	}
	for i, pr := range f.Providers {
		if len(pr.InputMediaTypes) == 0 {
			continue
		}
		base := fmt.Sprintf("providers[%d].input_media_types", i)
		if pr.Binary != "" {
			p.add(base, "a local CLI provider is text-only")
			continue
		}
		if len(pr.InputMediaTypes) > maxMediaModels {
			p.add(base, "%d models, at most %d", len(pr.InputMediaTypes), maxMediaModels)
		}
		for _, model := range sortedKeys(pr.InputMediaTypes) {
			key := base + "." + model
			if n := len(model); n < 1 || n > 200 {
				p.add(key, "model id must be 1..200 characters")
			}
			if pr.Models != nil && !slices.Contains(pr.Models, model) {
				p.add(key, "%q is not in providers[%d].models", model, i)
			}
			types := pr.InputMediaTypes[model]
			if len(types) > len(ContextMediaTypes) {
				p.add(key, "%d entries, at most %d", len(types), len(ContextMediaTypes))
			}
			for j, t := range types {
				if !slices.Contains(ContextMediaTypes, t) {
					p.add(key, "%q is not one of %s", t, quoteList(ContextMediaTypes))
				} else if slices.Contains(types[:j], t) {
					p.add(key, "%q is listed twice", t)
				}
			}
		}
	}
}

// MediaTypeError is the start-up refusal of a media type that provider i's
// extension cannot carry, naming the key and its line.
func (f *File) MediaTypeError(i int, model, mediaType string) error {
	key := fmt.Sprintf("providers[%d].input_media_types.%s", i, model)
	name := f.Path
	if name == "" {
		name = "host.toml"
	}
	kind := "images"
	if !strings.HasPrefix(mediaType, "image/") {
		kind = "PDF documents"
	}
	return fmt.Errorf("%s: %s: %q: extension %s cannot carry %s", f.where(name, f.pos.line(key)), key, mediaType, f.Providers[i].Extension, kind)
}
