// Package e2e holds the end-to-end tests: they build bin/adhost and the
// plugins, write a host.toml with fresh pins into a temporary directory,
// start `adhost serve --listen 127.0.0.1:0`, read its "listening on" line
// and drive it over HTTP like an operator and a client would. No fixed
// ports and no sleeps: every wait is on a process event or a line of
// output, bounded by the test's deadline.
//
// e2e_test.go holds the harness (newSite, startServer, adhost) and the
// operator-facing tests (health, SIGTERM, pins, reproducible digests);
// scenarios_test.go, errmatrix_test.go and cli_run_test.go drive the wire
// protocol's conformance scenarios and error matrix through it.
package e2e
