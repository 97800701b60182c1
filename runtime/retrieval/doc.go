// Package retrieval implements the retrieval family of wire-extensions
// §6 — scoped-retrieval, retrieval-indexing, document-ingestion and
// pdf-ingestion — over one durable KV store, and the two seams through
// which runs use what it stores:
//
//   - Corpora (service.go): each with a fixed index identity, checked
//     against the one recorded in the store at Open (INDEX_INCOMPATIBLE),
//     its documents in KV and an in-memory float32 matrix and lexical index
//     rebuilt from them, so memory never disagrees with the store.
//   - Search (search.go, lexical.go, matrix.go): the token grant and the
//     configured scope (the application authorizer's role), exact cosine
//     ranking, optionally fused with BM25, and the re-check of every hit's
//     document after the vector read.
//   - Index, delete and ingest (mutate.go, ingest.go, pdf.go): strict
//     bodies (requests.go, shapes.go), chunking with provenance, embedding
//     in bounded batches, and a compare-and-swap replace.
//   - The `retrieval` run option (evidence.go): Service implements
//     runtime.Evidence. The engine's context service decodes the option
//     with Plan during validation, searches after admission, and
//     re-authorizes the evidence — grant, visibility, revision, document
//     digest, never a new embedding — before every model step, before
//     run.completed, and on an idempotent replay (Recheck).
//   - References (documents.go): Service implements
//     attachments.DocumentStore, so context-references resolve against the
//     documents stored here for the run's credential.
//
// The package imports neither the host nor a concrete store; embedders
// reach it through the Embedder interface (a wasm extension in the host).
package retrieval
