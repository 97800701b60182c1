package cliturn

import (
	"testing"

	"adhost/abi"
	sdk "adhost/sdk-plugin"
)

func TestPrompt(t *testing.T) {
	one := &abi.CompleteInput{Instructions: " Be brief. ", Messages: []abi.Message{{Role: abi.RoleUser, Content: "Hi"}}}
	if got := Prompt(one); got != "Be brief.\n\nHi" {
		t.Errorf("one message: %q", got)
	}
	conv := &abi.CompleteInput{Messages: []abi.Message{
		{Role: abi.RoleUser, Content: "2+2?"}, {Role: abi.RoleAssistant, Content: "4"},
		{Role: abi.RoleTool, Name: "calc", Content: `{"v":4}`}, {Role: abi.RoleUser, Content: "and 3+3?"}}}
	want := "The conversation so far:\n\nUser: 2+2?\n\nAssistant: 4\n\nTool result (calc): {\"v\":4}\n\nUser: and 3+3?\n\nReply as the assistant to the last message."
	if got := Prompt(conv); got != want {
		t.Errorf("conversation:\n%q\nwant\n%q", got, want)
	}
}

func TestSafeModel(t *testing.T) {
	for m, ok := range map[string]bool{"claude-sonnet-4-5": true, "gpt-5-codex": true, "models/gemini-2.5-pro": true,
		"": false, "-p": false, "--dangerously-skip-permissions": false, "a b": false, "a\nb": false} {
		if SafeModel(m) != ok {
			t.Errorf("SafeModel(%q) = %v", m, !ok)
		}
	}
}

func TestClassify(t *testing.T) {
	for msg, code := range map[string]string{
		"Invalid API key · Please run /login":   sdk.CodeProviderAuth,
		"unexpected status 401 Unauthorized":    sdk.CodeProviderAuth,
		"You've hit your usage limit.":          sdk.CodeRateLimited,
		"Quota exceeded (RESOURCE_EXHAUSTED)":   sdk.CodeRateLimited,
		"stream disconnected before completion": sdk.CodeProviderError,
		"":                                      sdk.CodeProviderError,
	} {
		e := Classify("v", "kind", msg)
		if e.Code != code {
			t.Errorf("%q: %s, want %s", msg, e.Code, code)
		}
		if e.Message != "v: kind" {
			t.Errorf("%q: the private message carries the CLI's words: %q", msg, e.Message)
		}
	}
	if e := ExitError("v", 1, []byte("TypeError: x")); e.Code != sdk.CodeProviderFailed || e.Retryable {
		t.Errorf("exit error %+v", e)
	}
}
