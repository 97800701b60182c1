// Package attachments implements the selected-context features of
// wire-context.md: `attachments` (context-inputs), `outputArtifact`
// (draft-artifacts) and, through a Resolver, `reference` items
// (context-references).
//
// It owns the strict schema of both fields, the inline preflight and its
// byte budgets (§3.2–§3.3), the modality and artifact checks (§3.4–§3.5),
// the assembly of a run's context with its manifest (§4, §8), the prompt
// text the model sees (§6) and the draft artifact (§9). The engine calls it
// through runtime.ContextInputs; it never imports the engine, the host or a
// store, so references resolve through the small Resolver interface the
// host wires to whatever holds documents (StoreResolver over
// runtime/retrieval's stored documents).
//
// It also carries the `retrieval` run option (wire-extensions §6.3)
// through Options.Evidence: retrieved passages join the context list after
// the attachments and share its budgets, manifest and presentation
// (wire-context §4, §11.4). Reauthorize is the evidence step of an
// idempotent replay (§11.3).
package attachments
