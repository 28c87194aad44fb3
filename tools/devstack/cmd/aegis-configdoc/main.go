// Command aegis-configdoc writes docs/reference/configuration.md from the
// code that reads the environment (tools/devstack/internal/configdoc). Run
// it from the repository root, as `make generate` does:
//
//	go run ./tools/devstack/cmd/aegis-configdoc
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/aegis-payments/aegis/tools/devstack/internal/configdoc"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "aegis-configdoc:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	out, err := configdoc.Generate(root)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, filepath.FromSlash(configdoc.OutPath)), out, 0o644)
}
