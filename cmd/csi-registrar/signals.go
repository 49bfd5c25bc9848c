package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// exitSecondSignal is the exit code when a second stop signal ends the
// process before the graceful stop finished.
const exitSecondSignal = 1

// signalContext returns a context that ends on SIGTERM, SIGINT or SIGHUP (a
// clean exit with status 0) and the function that releases it. A second
// signal before that exits the process at once: the graceful stop takes too
// long for whoever sent it.
func signalContext(parent context.Context, log *slog.Logger) (context.Context, func()) {
	return signalContextExit(parent, log, os.Exit)
}

// signalContextExit is signalContext with the function that ends the process.
func signalContextExit(parent context.Context, log *slog.Logger, exit func(int)) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	released := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case s := <-ch:
			log.Info("signal received, shutting down", "signal", s.String(), "outcome", "stopping")
			cancel()
		case <-ctx.Done():
		}
		select {
		case s := <-ch:
			log.Warn("second signal received, exiting at once", "signal", s.String(), "outcome", "exit",
				"check", "a registration socket may be left behind; the next start removes it as stale")
			exit(exitSecondSignal)
		case <-released:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel()
		close(released)
		<-done
	}
}
