package vendorsim

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// testOnly are the packages the production binary must not link: they belong
// to tests (and sdktest's fake host would be dead weight in a server).
var testOnly = []string{"testing", "adhost/sdk-plugin/sdktest"}

// TestNoTestingInBinary checks that the adhost binary — which links this
// package through internal/qualify for `adhost qualify --simulate` — does not
// depend on the testing package or sdktest. Test helpers that need them
// belong in internal/vendorsim/simtest.
func TestNoTestingInBinary(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go command not found")
	}
	for _, root := range []string{"adhost/internal/vendorsim", "adhost/internal/qualify", "adhost/host/cmd/adhost"} {
		// Each line: a dependency of root and what it imports, so a
		// failure can name the offending importer.
		cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, root)
		cmd.Env = os.Environ()
		out, err := cmd.Output()
		if err != nil {
			msg := err.Error()
			if ee, ok := err.(*exec.ExitError); ok {
				msg += ": " + string(ee.Stderr)
			}
			t.Fatalf("go list -deps %s: %s", root, msg)
		}
		deps := map[string]bool{}
		importers := map[string][]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			deps[fields[0]] = true
			for _, imp := range fields[1:] {
				if slices.Contains(testOnly, imp) {
					importers[imp] = append(importers[imp], fields[0])
				}
			}
		}
		if !deps[root] {
			t.Fatalf("go list -deps %s did not list %s itself:\n%s", root, root, out)
		}
		for _, bad := range testOnly {
			if deps[bad] {
				t.Errorf("%s depends on %s (imported by %s); move test helpers to internal/vendorsim/simtest",
					root, bad, strings.Join(importers[bad], ", "))
			}
		}
	}
}
