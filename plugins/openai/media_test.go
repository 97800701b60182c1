package main

import (
	"errors"
	"testing"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

// Chat Completions has no inline PDF part: a PDF that reaches the adapter
// is refused with UNSUPPORTED_MODALITY before any request is sent, while
// an image in the same position is carried.
func TestPDFRefused(t *testing.T) {
	cfg := &config{maxTokensField: maxCompletionTokens, includeUsage: true}
	in := func(p abi.Part) *abi.CompleteInput {
		return &abi.CompleteInput{Model: "gpt-4o", MaxOutputTokens: 16, Step: 1, Messages: []abi.Message{
			{Role: abi.RoleUser, Content: "look", Parts: []abi.Part{{Type: abi.PartText, Text: "label"}, p}},
		}}
	}
	_, err := buildRequest(cfg, in(abi.Part{Type: abi.PartPDF, MediaType: "application/pdf", Data: "JVBERi0=", Name: "a.pdf"}))
	var se *sdk.Error
	if !errors.As(err, &se) || se.Code != codeUnsupportedModality {
		t.Fatalf("PDF part: %v", err)
	}
	if _, err := buildRequest(cfg, in(abi.Part{Type: abi.PartImage, MediaType: "image/jpeg", Data: "/9j/"})); err != nil {
		t.Fatalf("image part: %v", err)
	}
}
