package runtime

import (
	"context"
	"fmt"
	"math"

	"adhost/abi"
	"adhost/runtime/protocol"
)

// maxSafeInteger is 2^53−1, the largest integer every client can hold.
const maxSafeInteger = 1<<53 - 1

// UsageRecordSchema identifies the usage record format.
const UsageRecordSchema = "agenticdriver.usage.v2"

// Usage record status values.
const (
	UsageCompleted = "completed"
	UsageFailed    = "failed"
	UsageCancelled = "cancelled"
)

// UsageRecord is the prompt-free record of one executed run
// (wire-core §14.3): identifiers, timing and token/cost counts only. No
// input, output, tool data, request metadata or credentials.
type UsageRecord struct {
	Schema        string         `json:"schema"`
	EventID       string         `json:"eventId"`
	RunID         string         `json:"runId"`
	HostID        string         `json:"hostId"`
	AccountID     string         `json:"accountId,omitempty"`
	Subject       string         `json:"subject"`
	Provider      string         `json:"provider"`
	Vendor        string         `json:"vendor"`
	Model         string         `json:"model"`
	AuthMode      string         `json:"authMode"`
	Status        string         `json:"status"`
	Source        string         `json:"source"`
	StartedAt     string         `json:"startedAt"`
	FinishedAt    string         `json:"finishedAt"`
	DurationMs    int64          `json:"durationMs"`
	Usage         protocol.Usage `json:"usage"`
	ObservedUsage protocol.Usage `json:"observedUsage"`
	Coverage      UsageCoverage  `json:"coverage"`
}

// UsageCoverage says how complete the usage of a run is.
type UsageCoverage struct {
	StartedSteps   int `json:"startedSteps"`
	CompletedSteps int `json:"completedSteps"`
	// ReportedSteps counts, per Usage field name, the completed steps that
	// reported it. Fields no step reported are absent.
	ReportedSteps map[string]int `json:"reportedSteps"`
}

// Usage fields in wire order.
const (
	fInput = iota
	fOutput
	fCached
	fReasoning
	fCost
	fAPICost
	numUsageFields
)

var usageFieldNames = [numUsageFields]string{
	"inputTokens", "outputTokens", "cachedInputTokens", "reasoningTokens", "costUsd", "apiEquivalentCostUsd",
}

// normalizeUsage applies wire-core §14.1 to one step's reported usage.
func normalizeUsage(u *abi.Usage) protocol.Usage {
	var n protocol.Usage
	n.InputTokens = safeCount(u.InputTokens)
	n.OutputTokens = safeCount(u.OutputTokens)
	n.CachedInputTokens = safeCount(u.CachedInputTokens)
	n.ReasoningTokens = safeCount(u.ReasoningTokens)
	n.CostUSD = safeAmount(u.CostUSD)
	n.APIEquivalentCostUSD = safeAmount(u.APIEquivalentCostUSD)
	if n.CachedInputTokens != nil && n.InputTokens != nil && *n.CachedInputTokens > *n.InputTokens {
		n.CachedInputTokens = nil
	}
	if n.ReasoningTokens != nil && n.OutputTokens != nil && *n.ReasoningTokens > *n.OutputTokens {
		n.ReasoningTokens = nil
	}
	return n
}

func safeCount(v *int64) *int64 {
	if v == nil || *v < 0 || *v > maxSafeInteger {
		return nil
	}
	c := *v
	return &c
}

func safeAmount(v *float64) *float64 {
	if v == nil || *v < 0 || math.IsNaN(*v) || math.IsInf(*v, 0) {
		return nil
	}
	c := *v
	return &c
}

// usageAccount sums the usage of a run's steps (run goroutine only).
type usageAccount struct {
	started, completed int
	reported           [numUsageFields]int
	ints               [fCost]int64
	floats             [numUsageFields - fCost]float64
	overflow           [numUsageFields]bool
}

func (a *usageAccount) add(u *protocol.Usage) {
	for i, v := range [...]*int64{u.InputTokens, u.OutputTokens, u.CachedInputTokens, u.ReasoningTokens} {
		if v == nil {
			continue
		}
		a.reported[i]++
		if a.ints[i] > maxSafeInteger-*v {
			a.overflow[i] = true
			continue
		}
		a.ints[i] += *v
	}
	for j, v := range [...]*float64{u.CostUSD, u.APIEquivalentCostUSD} {
		if v == nil {
			continue
		}
		i := fCost + j
		a.reported[i]++
		a.floats[j] += *v
		if math.IsInf(a.floats[j], 0) {
			a.overflow[i] = true
		}
	}
}

// totals has a field only if every started step completed and reported it
// (wire-core §14.2); {} otherwise.
func (a *usageAccount) totals() protocol.Usage {
	return a.sum(func(i int) bool {
		return a.started > 0 && a.completed == a.started && a.reported[i] == a.started
	})
}

// observed sums whatever was reported.
func (a *usageAccount) observed() protocol.Usage {
	return a.sum(func(i int) bool { return a.reported[i] > 0 })
}

func (a *usageAccount) sum(include func(i int) bool) protocol.Usage {
	var u protocol.Usage
	ints := [...]**int64{&u.InputTokens, &u.OutputTokens, &u.CachedInputTokens, &u.ReasoningTokens}
	for i, p := range ints {
		if include(i) && !a.overflow[i] {
			v := a.ints[i]
			*p = &v
		}
	}
	floats := [...]**float64{&u.CostUSD, &u.APIEquivalentCostUSD}
	for j, p := range floats {
		if i := fCost + j; include(i) && !a.overflow[i] {
			v := a.floats[j]
			*p = &v
		}
	}
	return u
}

func (a *usageAccount) coverage() UsageCoverage {
	c := UsageCoverage{StartedSteps: a.started, CompletedSteps: a.completed, ReportedSteps: map[string]int{}}
	for i, n := range a.reported {
		if n > 0 {
			c.ReportedSteps[usageFieldNames[i]] = n
		}
	}
	return c
}

// usageRecord builds the run's record once it has finished.
func (r *Run) usageRecord() *UsageRecord {
	inst := r.plan.inst
	// finishedAt is derived from the monotonic clock so that it is never
	// before startedAt and durationMs matches the two timestamps.
	started := r.startedAt
	finished := started.Add(r.finishedAt.Sub(started))
	status := UsageCompleted
	if r.err != nil {
		status = UsageFailed
		if r.cancelled {
			status = UsageCancelled
		}
	}
	rec := &UsageRecord{
		Schema:        UsageRecordSchema,
		EventID:       r.id,
		RunID:         r.id,
		HostID:        r.e.hostID,
		AccountID:     inst.AccountID,
		Subject:       r.subject,
		Provider:      inst.ID,
		Vendor:        orDefault(inst.Vendor, inst.ID),
		Model:         r.req.Model,
		AuthMode:      orDefault(inst.AuthMode, "none"),
		Status:        status,
		Source:        orDefault(inst.UsageSource, "adapter-report"),
		StartedAt:     formatTimestamp(started),
		FinishedAt:    formatTimestamp(finished),
		DurationMs:    finished.UnixMilli() - started.UnixMilli(),
		Usage:         r.acct.totals(),
		ObservedUsage: r.acct.observed(),
		Coverage:      r.acct.coverage(),
	}
	return rec
}

// orDefault is v, or def when v is the zero value.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// AsyncUsageSink is a UsageSink whose RecordUsage only queues the record
// for a writer of its own (store.Store and store.JSONL batch their writes).
// The engine calls such a sink on the run's goroutine: starting a goroutine
// per run to guard against a slow sink costs more than the record itself
// once the sink does no I/O on the caller's path.
type AsyncUsageSink interface {
	UsageSink
	// QueuesUsage reports whether RecordUsage keeps that promise: it
	// returns at once while the sink keeps up and, when it is behind,
	// waits no longer than ctx (the engine's 2 s bound). A sink that
	// wraps others (a tee) reports true only if all of them do.
	QueuesUsage() bool
}

// deliverUsage hands the record to the sink with a 2 s bound. The outcome
// is already public; a sink failure is only logged.
func (r *Run) deliverUsage() {
	sink := r.e.usageSink
	if sink == nil {
		return
	}
	rec := r.usageRecord()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), usageSinkTimeout)
	defer cancel()
	var err error
	if a, ok := sink.(AsyncUsageSink); ok && a.QueuesUsage() {
		err = recordUsage(ctx, sink, rec)
	} else {
		// A sink that may block past ctx is called on a goroutine of its
		// own, so that the bound holds whatever it does; Shutdown waits
		// for it through e.calls.
		errc := make(chan error, 1)
		r.e.calls.Go(func() { errc <- recordUsage(ctx, sink, rec) })
		select {
		case err = <-errc:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		r.e.log.Warn("usage record not delivered", "runId", r.id, "error", fmt.Sprintf("%T", err))
	}
}

// recordUsage calls the sink; a panic is errPanic, never the host's end.
func recordUsage(ctx context.Context, sink UsageSink, rec *UsageRecord) (err error) {
	defer func() {
		if recover() != nil {
			err = errPanic
		}
	}()
	return sink.RecordUsage(ctx, rec)
}

func typeName(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprintf("%T", err)
}

// EmbeddingUsageSchema identifies the embedding usage record format.
const EmbeddingUsageSchema = "adhost.embedding-usage.v1"

// EmbeddingUsageRecord is the prompt-free record of one embedding call
// made for retrieval: who caused it, on which embedding instance, account
// and model, for which corpus and operation, and how much it used. No
// text, query or vector.
//
// It is a record kind of its own, not a UsageRecord, because
// wire-extensions §6.5 meters embedding usage on its own, attributes it to
// the embedding account and never adds it to generation token totals: a
// reader of generation usage cannot sum it in by accident, and the usage
// JSONL (agenticdriver.usage.v2 lines only) never carries it.
type EmbeddingUsageRecord struct {
	Schema     string `json:"schema"`
	EventID    string `json:"eventId"`
	HostID     string `json:"hostId"`
	AccountID  string `json:"accountId"`
	Subject    string `json:"subject,omitempty"`
	Provider   string `json:"provider"` // the embedding instance id
	Model      string `json:"model"`
	Corpus     string `json:"corpus"`
	Operation  string `json:"operation"` // "index" (index and ingest) or "search" (search and run retrieval)
	Inputs     int    `json:"inputs"`    // texts embedded by the call
	RecordedAt string `json:"recordedAt"`
	// InputTokens is what the provider reported; absent when it reported
	// nothing (local-hashing, or a service without usage).
	InputTokens *int64 `json:"inputTokens,omitempty"`
}

// EmbeddingUsageSink stores embedding usage records (store.Store does).
type EmbeddingUsageSink interface {
	RecordEmbeddingUsage(ctx context.Context, rec *EmbeddingUsageRecord) error
}

// HostID is the id this engine writes into usage records, for the
// records other features (embedding usage) make beside its own.
func (e *Engine) HostID() string { return e.hostID }
