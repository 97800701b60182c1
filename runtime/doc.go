// Package runtime is the run engine of adhost: semantic validation,
// authorization, admission, the step and tool loop, events with sequences,
// the idle timer, cancellation, structured output and usage.
//
// It owns the protocol's behaviour and nothing about transport or
// persistence: it declares the small interfaces it needs (Provider, ToolSet,
// and the stores) and imports neither host nor store.
package runtime
