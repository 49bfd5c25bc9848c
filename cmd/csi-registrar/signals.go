package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// signalContext returns a context that ends on SIGTERM, SIGINT or SIGHUP (a
// clean exit with status 0) and the function that releases it.
func signalContext(parent context.Context, log *slog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-ch:
			log.Info("signal received, shutting down", "signal", s.String())
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel()
		<-done
	}
}
