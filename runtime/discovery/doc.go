// Package discovery answers the discovery half of GET /v1/providers
// (wire-core §6, wire-extensions §7): each provider instance's health and
// model catalog, from the extension's read-only inspect probe.
//
// The cache follows §6.2 exactly, because probes hit vendor APIs that rate
// limit and bill: per instance, the last probe outcome (failures included)
// is reused for CacheTTL (30 s); refresh bypasses the TTL but not the
// MinRefresh floor (1 s since the last probe finished); concurrent readers
// share one in-flight probe; the probe runs on the cache's own context,
// bounded by Timeout (5 s → DISCOVERY_TIMEOUT), so a reader that gives up
// cancels nothing others wait on. There is no background polling: a probe
// runs only when a reader needs one.
//
// Health messages are fixed public texts per code; nothing the provider
// returned other than the code, model ids and the completeness flag ever
// reaches the output. The catalog never widens permission: the instance's
// allowlist (Provider.models) stays the execution rule.
package discovery
