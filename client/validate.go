package client

import (
	"encoding/json"
	"time"

	"adhost/runtime/protocol"
)

// ProtocolInfo is the GET /v1/protocol document (wire-core §2.2).
type ProtocolInfo struct {
	Protocol          string   `json:"protocol"`
	Version           string   `json:"version"`
	SupportedVersions []string `json:"supportedVersions"`
	Features          []string `json:"features"`
}

// HasFeature reports whether the host advertises feature f.
func (p *ProtocolInfo) HasFeature(f string) bool {
	for _, x := range p.Features {
		if x == f {
			return true
		}
	}
	return false
}

// Provider is one entry of GET /v1/providers (wire-core §6.1). Optional
// fields the host omitted stay nil.
type Provider struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Vendor       string          `json:"vendor"`
	AuthMode     string          `json:"authMode"`
	Capabilities map[string]bool `json:"capabilities"`
	// Models is the execution allowlist: nil = any explicit model id,
	// empty = none.
	Models          []string            `json:"models,omitempty"`
	InputMediaTypes map[string][]string `json:"inputMediaTypes,omitempty"`
	UsageStatID     *string             `json:"usageStatId,omitempty"`
	Health          *Health             `json:"health,omitempty"`
	ModelCatalog    *ModelCatalog       `json:"modelCatalog,omitempty"`
}

// Health is a provider's discovery health (wire-core §6.1).
type Health struct {
	Status    string    `json:"status"`
	Code      string    `json:"code"`
	Message   string    `json:"message"`
	CheckedAt time.Time `json:"checkedAt"`
}

// ModelCatalog is what discovery learned about a provider's models.
type ModelCatalog struct {
	Source   string   `json:"source"`
	Models   []string `json:"models"`
	Complete bool     `json:"complete"`
}

func validateProtocol(body []byte) (*ProtocolInfo, error) {
	m, ok := parseObject(body)
	if !ok {
		return nil, invalidResponse("protocol document is not a JSON object")
	}
	var p ProtocolInfo
	if p.Protocol, ok = asString(m["protocol"]); !ok || p.Protocol != protocol.Name {
		return nil, invalidResponse("protocol is not %q", protocol.Name)
	}
	if p.Version, ok = asString(m["version"]); !ok || p.Version != protocol.Version {
		return nil, invalidResponse("version is not %q", protocol.Version)
	}
	if p.SupportedVersions, ok = asStringArray(m["supportedVersions"]); !ok || !contains(p.SupportedVersions, protocol.Version) {
		return nil, invalidResponse("supportedVersions does not contain %q", protocol.Version)
	}
	if p.Features, ok = asStringArray(m["features"]); !ok {
		return nil, invalidResponse("features is not an array of strings")
	}
	return &p, nil
}

var (
	authModes      = set("api-key", "cli-session", "none")
	healthStatuses = set("ready", "unauthenticated", "unavailable", "unsupported", "unknown")
	catalogSources = set("provider", "configured", "unavailable")
	mediaTypes     = set("text/plain", "text/markdown", "image/png", "image/jpeg", "image/webp", "application/pdf")
)

const (
	maxCatalogModels  = 1000
	maxMediaPerModel  = 6
	progressPhaseList = "model, tool, context"
)

func validateProviders(body []byte) ([]Provider, error) {
	m, ok := parseObject(body)
	if !ok {
		return nil, invalidResponse("provider catalog is not a JSON object")
	}
	items, ok := asArray(m["providers"])
	if !ok {
		return nil, invalidResponse("providers is not an array")
	}
	out := make([]Provider, 0, len(items))
	for i, raw := range items {
		p, err := validateProvider(raw)
		if err != nil {
			return nil, invalidResponse("providers[%d]: %s", i, err)
		}
		out = append(out, *p)
	}
	return out, nil
}

// fieldError is a validation failure inside a document; the caller wraps it
// into the right client code.
type fieldError string

func (e fieldError) Error() string { return string(e) }

func validateProvider(raw json.RawMessage) (*Provider, error) {
	e, ok := asObject(raw)
	if !ok {
		return nil, fieldError("not an object")
	}
	var p Provider
	for _, f := range []struct {
		name string
		dst  *string
	}{{"id", &p.ID}, {"name", &p.Name}, {"vendor", &p.Vendor}} {
		if *f.dst, ok = asString(e[f.name]); !ok {
			return nil, fieldError(f.name + " is not a string")
		}
	}
	if p.AuthMode, ok = asString(e["authMode"]); !ok || !authModes[p.AuthMode] {
		return nil, fieldError("authMode is invalid")
	}
	caps, ok := asObject(e["capabilities"])
	if !ok {
		return nil, fieldError("capabilities is not an object")
	}
	p.Capabilities = make(map[string]bool, len(caps))
	for k, v := range caps {
		b, ok := asBool(v)
		if !ok {
			return nil, fieldError("capability " + k + " is not a boolean")
		}
		p.Capabilities[k] = b
	}
	if caps["tools"] == nil || caps["textStreaming"] == nil {
		return nil, fieldError("capabilities lack tools or textStreaming")
	}
	if raw, present := e["models"]; present {
		if p.Models, ok = asStringArray(raw); !ok {
			return nil, fieldError("models is not an array of strings")
		}
	}
	if raw, present := e["inputMediaTypes"]; present {
		mt, ok := asObject(raw)
		if !ok {
			return nil, fieldError("inputMediaTypes is not an object")
		}
		p.InputMediaTypes = make(map[string][]string, len(mt))
		for model, v := range mt {
			list, ok := asStringArray(v)
			if !ok || len(list) > maxMediaPerModel {
				return nil, fieldError("inputMediaTypes entry is invalid")
			}
			for _, t := range list {
				if !mediaTypes[t] {
					return nil, fieldError("inputMediaTypes has an unknown media type")
				}
			}
			p.InputMediaTypes[model] = list
		}
	}
	if raw, present := e["usageStatId"]; present {
		s, ok := asString(raw)
		if !ok {
			return nil, fieldError("usageStatId is not a string")
		}
		p.UsageStatID = &s
	}
	if raw, present := e["health"]; present {
		h, ok := asObject(raw)
		if !ok {
			return nil, fieldError("health is not an object")
		}
		var hv Health
		if hv.Status, ok = asString(h["status"]); !ok || !healthStatuses[hv.Status] {
			return nil, fieldError("health.status is invalid")
		}
		if hv.Code, ok = asNonEmptyString(h["code"]); !ok {
			return nil, fieldError("health.code is invalid")
		}
		if hv.Message, ok = asString(h["message"]); !ok {
			return nil, fieldError("health.message is not a string")
		}
		if hv.CheckedAt, ok = asTimestamp(h["checkedAt"]); !ok {
			return nil, fieldError("health.checkedAt is not an RFC 3339 date-time")
		}
		p.Health = &hv
	}
	if raw, present := e["modelCatalog"]; present {
		c, ok := asObject(raw)
		if !ok {
			return nil, fieldError("modelCatalog is not an object")
		}
		var cv ModelCatalog
		if cv.Source, ok = asString(c["source"]); !ok || !catalogSources[cv.Source] {
			return nil, fieldError("modelCatalog.source is invalid")
		}
		if cv.Models, ok = asStringArray(c["models"]); !ok || len(cv.Models) > maxCatalogModels {
			return nil, fieldError("modelCatalog.models is invalid")
		}
		if cv.Complete, ok = asBool(c["complete"]); !ok {
			return nil, fieldError("modelCatalog.complete is not a boolean")
		}
		p.ModelCatalog = &cv
	}
	return &p, nil
}

// validateUsage checks a Usage object (wire-core §14.1): every present
// field is a non-null non-negative number, token counts are safe integers.
func validateUsage(raw json.RawMessage) (protocol.Usage, bool) {
	var u protocol.Usage
	m, ok := asObject(raw)
	if !ok {
		return u, false
	}
	for _, f := range []struct {
		name string
		dst  **int64
	}{
		{"inputTokens", &u.InputTokens}, {"outputTokens", &u.OutputTokens},
		{"cachedInputTokens", &u.CachedInputTokens}, {"reasoningTokens", &u.ReasoningTokens},
	} {
		raw, present := m[f.name]
		if !present {
			continue
		}
		n, ok := asSafeInt(raw)
		if !ok || n < 0 {
			return u, false
		}
		*f.dst = &n
	}
	for _, f := range []struct {
		name string
		dst  **float64
	}{{"costUsd", &u.CostUSD}, {"apiEquivalentCostUsd", &u.APIEquivalentCostUSD}} {
		raw, present := m[f.name]
		if !present {
			continue
		}
		x, ok := asNumber(raw)
		if !ok || x < 0 {
			return u, false
		}
		*f.dst = &x
	}
	return u, true
}

// validateErrorInfo checks an ErrorInfo (wire-core §7.1).
func validateErrorInfo(raw json.RawMessage) (*protocol.ErrorInfo, bool) {
	m, ok := asObject(raw)
	if !ok {
		return nil, false
	}
	var info protocol.ErrorInfo
	code, ok := asNonEmptyString(m["code"])
	if !ok {
		return nil, false
	}
	info.Code = protocol.Code(code)
	if info.Message, ok = asString(m["message"]); !ok {
		return nil, false
	}
	if info.Retryable, ok = asBool(m["retryable"]); !ok {
		return nil, false
	}
	if raw, present := m["outcome"]; present {
		if o, ok := asString(raw); !ok || o != protocol.OutcomeUncertain {
			return nil, false
		}
		info.Outcome = protocol.OutcomeUncertain
	}
	return &info, true
}

// validateResult checks a RunResult (wire-core §4) against the request and
// the stream's runId (empty runID: JSON mode, any non-empty runId).
func validateResult(raw json.RawMessage, req *protocol.RunRequest, runID string) (*protocol.RunResult, error) {
	m, ok := asObject(raw)
	if !ok {
		return nil, fieldError("result is not an object")
	}
	var r protocol.RunResult
	if r.RunID, ok = asNonEmptyString(m["runId"]); !ok || (runID != "" && r.RunID != runID) {
		return nil, fieldError("result.runId does not match the run")
	}
	if r.Provider, ok = asString(m["provider"]); !ok || r.Provider != req.Provider {
		return nil, fieldError("result.provider does not match the request")
	}
	if r.Model, ok = asString(m["model"]); !ok || r.Model != req.Model {
		return nil, fieldError("result.model does not match the request")
	}
	if r.Text, ok = asString(m["text"]); !ok {
		return nil, fieldError("result.text is not a string")
	}
	if r.Usage, ok = validateUsage(m["usage"]); !ok {
		return nil, fieldError("result.usage is invalid")
	}
	steps, ok := asSafeInt(m["steps"])
	if !ok || steps < 1 {
		return nil, fieldError("result.steps is not a positive integer")
	}
	r.Steps = int(steps)
	if r.FinishReason, ok = asString(m["finishReason"]); !ok || (r.FinishReason != "stop" && r.FinishReason != "length") {
		return nil, fieldError("result.finishReason is invalid")
	}
	if out, present := m["output"]; present {
		r.Output = out
	}
	// A session comes back exactly for a run that named one, with its next
	// revision (client/sessions.go); context members are arrays when present.
	if err := validateResultSession(m["session"], req); err != nil {
		return nil, err
	}
	r.Session = m["session"]
	if err := validateContextResult(m, &r); err != nil { // client/context.go
		return nil, err
	}
	if err := validateResultRetrieval(m, req, &r); err != nil { // client/retrieval.go
		return nil, err
	}
	return &r, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func set(items ...string) map[string]bool {
	m := make(map[string]bool, len(items))
	for _, s := range items {
		m[s] = true
	}
	return m
}
