// Codexgate runs OpenAI Codex workers and lets a person approve or deny what
// they ask for. See DESIGN.md for the architecture and README.md for use.
package main

import (
	"fmt"
	"os"

	"codexgate/cli"
)

// Set by the Makefile: the version, and the pinned codex it installed.
var (
	version     = "dev"
	pinnedCodex = ""
)

func main() {
	if err := cli.Run(os.Args[1:], cli.Build{Version: version, Codex: pinnedCodex}); err != nil {
		fmt.Fprintln(os.Stderr, "codexgate:", err)
		os.Exit(1)
	}
}
