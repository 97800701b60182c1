// Command adhost is the AgenticDriver host: `adhost serve`, `init`, `run`,
// `plugins`, `qualify`, `status` and `doctor` (host-config.md §1). All of
// it lives in package host; see host.Main.
package main

import (
	"context"
	"os"

	"adhost/host"
)

func main() {
	os.Exit(host.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
