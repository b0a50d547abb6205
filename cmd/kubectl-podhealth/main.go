package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/podhealth/podhealth/cmd/kubectl-podhealth/internal/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := plugin.Main(ctx, os.Args[1:], plugin.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}, plugin.Env{})
	stop()
	os.Exit(code)
}
