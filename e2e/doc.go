// Package e2e holds the end-to-end tests: they build bin/adhost and the
// plugins, write a host.toml with fresh pins into a temporary directory,
// start `adhost serve --listen 127.0.0.1:0`, read its "listening on" line
// and drive it over HTTP like an operator and a client would. No fixed
// ports and no sleeps: every wait is on a process event or a line of
// output, bounded by the test's deadline.
//
// The package has no code of its own; see e2e_test.go.
package e2e
