// Package protocol holds the AgenticDriver 1.0 wire vocabulary shared by the
// run engine, the HTTP transport and the Go client: error codes with their
// fixed messages and HTTP statuses, the run request and result shapes, and
// the strict request decoder.
package protocol
