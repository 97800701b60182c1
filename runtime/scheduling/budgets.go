package scheduling

import "adhost/runtime"

// Budgets is the runtime.BudgetPolicy of host.toml [resources]
// (wire-extensions §11.1). A run is held to its subject's budget — the
// subject's own table, else the default — and, when its provider account
// has a table, to that account's as well: the subject's budget is what one
// team may spend per run, the account's what one vendor account may, and
// neither can be spent around the other.
type Budgets struct {
	Default  *runtime.Budget
	Subjects map[string]runtime.Budget
	Accounts map[string]runtime.Budget
}

// Budgets implements runtime.BudgetPolicy.
func (b *Budgets) Budgets(subject, account string) []runtime.Budget {
	var out []runtime.Budget
	if s, ok := b.Subjects[subject]; ok {
		out = append(out, s)
	} else if b.Default != nil {
		out = append(out, *b.Default)
	}
	if a, ok := b.Accounts[account]; ok && account != "" {
		out = append(out, a)
	}
	return out
}
