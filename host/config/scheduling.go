package config

// The fair-scheduling keys of [limits] (wire-extensions §11.1,
// host-config §5):
//
//	max_concurrent_runs_per_account  1..max_concurrent_runs; absent: no account cap
//	queue_total, queue_per_subject   the waiting queue, set together;
//	                                 1..100000, per subject ≤ total; absent: no queue
//	[limits.subjects]  subject = runs   replaces the per-subject cap for it
//	[limits.accounts]  account_id = runs replaces the per-account cap for it
//
// Every cap stays within max_concurrent_runs, which always holds. A
// subject or account override must name a token's subject or a provider's
// account_id: an override nobody can reach is a typo the host would never
// honour.

// MaxQueue bounds queue_total and queue_per_subject (wire-core §8.1).
const MaxQueue = 100000

// QueueOn reports whether the admission queue is configured.
func (f *File) QueueOn() bool { return f.Limits.QueueTotal > 0 }

func (f *File) validateScheduling(p *problems) {
	l := f.Limits
	total := max(1, l.MaxConcurrentRuns)
	if _, set := f.pos["limits.max_concurrent_runs_per_account"]; set || l.MaxConcurrentRunsPerAccount != 0 {
		if l.MaxConcurrentRunsPerAccount < 1 || l.MaxConcurrentRunsPerAccount > total {
			p.add("limits.max_concurrent_runs_per_account", "%d out of range 1..%d (at most limits.max_concurrent_runs)", l.MaxConcurrentRunsPerAccount, total)
		}
	}
	_, totalSet := f.pos["limits.queue_total"]
	_, perSet := f.pos["limits.queue_per_subject"]
	totalSet = totalSet || l.QueueTotal != 0
	perSet = perSet || l.QueuePerSubject != 0
	switch {
	case totalSet && !perSet:
		p.add("limits.queue_total", "needs limits.queue_per_subject as well")
	case perSet && !totalSet:
		p.add("limits.queue_per_subject", "needs limits.queue_total as well")
	case totalSet:
		if l.QueueTotal < 1 || l.QueueTotal > MaxQueue {
			p.add("limits.queue_total", "%d out of range 1..%d", l.QueueTotal, MaxQueue)
		} else if l.QueuePerSubject < 1 || l.QueuePerSubject > l.QueueTotal {
			p.add("limits.queue_per_subject", "%d out of range 1..%d (at most limits.queue_total)", l.QueuePerSubject, l.QueueTotal)
		}
	}
	subjects := map[string]bool{}
	for _, t := range f.Tokens {
		subjects[t.Subject] = true
	}
	accounts := map[string]bool{}
	for _, pr := range f.Providers {
		if pr.AccountID != "" {
			accounts[pr.AccountID] = true
		}
	}
	check := func(table, what string, m map[string]int, known map[string]bool) {
		for _, k := range sortedKeys(m) {
			key := "limits." + table + "." + k
			if v := m[k]; v < 1 || v > total {
				p.add(key, "%d out of range 1..%d (at most limits.max_concurrent_runs)", v, total)
			}
			if !known[k] {
				p.add(key, "%q is not the %s of any configured %s", k, what, map[string]string{"subjects": "token", "accounts": "provider"}[table])
			}
		}
	}
	check("subjects", "subject", l.Subjects, subjects)
	check("accounts", "account_id", l.Accounts, accounts)
}

// Resources is [resources]: per-run budgets (wire-extensions §11.1), in
// [resources.default], [resources.subjects.NAME] and
// [resources.accounts.ID]. A subject's table replaces the default for it;
// an account's table holds as well. Nil when absent: no budgets.
type Resources struct {
	Default  *Budget           `toml:"default"`
	Subjects map[string]Budget `toml:"subjects"`
	Accounts map[string]Budget `toml:"accounts"`
}

// Budget is one [resources.*] table.
type Budget struct {
	// MaxTokens bounds the reported input + output tokens of a run over
	// all its steps, 1..2^53−1; 0 (absent): none.
	MaxTokens int64 `toml:"max_tokens"`
	// MaxCostUSD bounds the reported costUsd of a run; > 0; absent: none.
	MaxCostUSD float64 `toml:"max_cost_usd"`
	// UnknownUsage is "allow" (the default: a limited total some response
	// did not report is checked over what was reported) or "reject" (the
	// run stops with RESOURCE_USAGE_UNKNOWN).
	UnknownUsage string `toml:"unknown_usage"`
}

// MaxBudgetTokens is 2^53−1, the largest count every client can hold.
const MaxBudgetTokens = 1<<53 - 1

func (f *File) validateResources(p *problems) {
	r := f.Resources
	if r == nil {
		return
	}
	check := func(key string, b Budget) {
		if _, set := f.pos[key+".max_tokens"]; (set || b.MaxTokens != 0) && (b.MaxTokens < 1 || b.MaxTokens > MaxBudgetTokens) {
			p.add(key+".max_tokens", "%d out of range 1..%d", b.MaxTokens, int64(MaxBudgetTokens))
		}
		if _, set := f.pos[key+".max_cost_usd"]; (set || b.MaxCostUSD != 0) && !(b.MaxCostUSD > 0 && b.MaxCostUSD <= 1e15) {
			p.add(key+".max_cost_usd", "%v must be a positive amount (at most 1e15)", b.MaxCostUSD)
		}
		switch b.UnknownUsage {
		case "", "allow", "reject":
		default:
			p.add(key+".unknown_usage", "%q is not \"allow\" or \"reject\"", b.UnknownUsage)
		}
	}
	if r.Default != nil {
		check("resources.default", *r.Default)
	}
	subjects := map[string]bool{}
	for _, t := range f.Tokens {
		subjects[t.Subject] = true
	}
	for _, k := range sortedKeys(r.Subjects) {
		key := "resources.subjects." + k
		check(key, r.Subjects[k])
		if !subjects[k] {
			p.add(key, "%q is not the subject of any configured token", k)
		}
	}
	accounts := map[string]bool{}
	for _, pr := range f.Providers {
		accounts[pr.AccountID] = pr.AccountID != ""
	}
	for _, k := range sortedKeys(r.Accounts) {
		key := "resources.accounts." + k
		check(key, r.Accounts[k])
		if !accounts[k] {
			p.add(key, "%q is not the account_id of any configured provider", k)
		}
	}
}
