// Command aegisctl is the ops CLI over dlq-admin's REST API: dead letters,
// bulk replay jobs and reconciliation, for people and for scripts. Everything
// it does is in internal/ctl; `aegisctl --help` prints the usage.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/aegis-payments/aegis/services/dlq-admin/internal/ctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := ctl.Main(ctx, ctl.IO{
		Args: os.Args[1:], Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv,
		Interactive: isTerminal(os.Stderr),
	})
	stop()
	os.Exit(code)
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
