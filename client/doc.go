// Package client is the Go client of the AgenticDriver 1.0 wire protocol
// (wire-core §1–§7): it calls GET /v1/protocol, GET /v1/providers and
// POST /v1/runs in JSON or SSE mode, and validates everything the host sends
// the way upstream clients do (§5.4, §6.3), so a misbehaving host is reported
// with a typed error instead of being trusted.
//
// Transport rules it enforces (§1.4): plain http:// only to a loopback host,
// no user-info, query or fragment in the base URL, redirects are never
// followed (the bearer token must never reach another origin), and a
// response carrying an AgenticDriver-Version other than 1.0 is rejected
// before its body is read.
//
// Every failure is a *Error whose Code is a wire code: a host error is kept
// as the host sent it (unknown codes included), and the client's own checks
// use the client-only codes INVALID_STREAM, INVALID_RESPONSE,
// INCOMPLETE_STREAM, RESPONSE_TOO_LARGE, UNSUPPORTED_EVENT, HTTP_ERROR,
// INSECURE_TRANSPORT, AUTH_REQUIRED and UNSUPPORTED_PROTOCOL_VERSION.
package client
