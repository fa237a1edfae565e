// Command gendocs writes docs/configuration.md from the agent's settings
// table (agent/config). Run it with `go generate ./agent/config`.
package main

import (
	"flag"
	"log"
	"os"

	"github.com/betcode-dev/betcode/agent/config"
)

func main() {
	out := flag.String("o", "docs/configuration.md", "file to write")
	flag.Parse()
	if err := os.WriteFile(*out, config.Markdown(), 0o644); err != nil {
		log.Fatal(err)
	}
}
