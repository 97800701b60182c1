package e2e_test

import "regexp"

// uuidPattern is a lowercase UUID, as the host makes run and job ids.
var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
