// Command csi-registrar registers a CSI driver with the kubelet (`register`,
// a drop-in for node-driver-registrar), runs a reference CSI node driver
// (`driver`), probes a driver for an exec liveness probe (`probe`), and
// diagnoses plugin registration on a node (`doctor`).
//
// Invoked as csi-node-driver-registrar (the image has that name too), it runs
// `register` with upstream's arguments unchanged.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/csi-registrar/csi-registrar/registrar"
	"github.com/csi-registrar/csi-registrar/registrar/csiplugin"
	"github.com/csi-registrar/csi-registrar/registrar/nodestatus"
	"github.com/csi-registrar/csi-registrar/stubdriver"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// upstreamName is the name of kubernetes-csi's sidecar binary; invoked under
// it, csi-registrar runs the register role.
const upstreamName = "csi-node-driver-registrar"

// Exit codes.
const (
	exitOK       = 0
	exitError    = 1
	exitBadInput = 2
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr, defaultRoles()))
}

// roles are what the subcommands call once flags became options; tests
// replace them to check the mapping without starting anything.
type roles struct {
	register func(context.Context, registrar.Options, nodestatus.Options) error
	driver   func(context.Context, stubdriver.Options) error
}

func defaultRoles() roles {
	return roles{
		register: runRegistrar,
		driver: func(ctx context.Context, o stubdriver.Options) error {
			d, err := stubdriver.New(o)
			if err != nil {
				return err
			}
			return d.Run(ctx)
		},
	}
}

// run executes the command line and returns the process exit code.
func run(args []string, stdout, stderr io.Writer, r roles) int {
	code, err := execute(args, stdout, stderr, r)
	if err != nil {
		fmt.Fprintln(stderr, "error:", message(err))
	}
	return code
}

// execute runs the command line and returns the exit code and the error
// that made it fail: a bad value is a *csiplugin.ValidationError (exit 2).
func execute(args []string, stdout, stderr io.Writer, r roles) (int, error) {
	if len(args) > 0 && filepath.Base(args[0]) == upstreamName {
		args = append([]string{args[0], "register"}, args[1:]...)
	}
	err := newApp(stdout, stderr, r).Run(args)
	var ec cli.ExitCoder
	switch {
	case err == nil:
		return exitOK, nil
	case errors.As(err, &ec):
		return ec.ExitCode(), err
	case csiplugin.IsValidationError(err), isUsageError(err):
		return exitBadInput, err
	}
	return exitError, err
}

func newApp(stdout, stderr io.Writer, r roles) *cli.App {
	return &cli.App{
		Name:  "csi-registrar",
		Usage: "register a CSI driver with the kubelet, and a reference CSI node driver",
		// No App.Version: urfave/cli's version flag would take -v, which is
		// the verbosity flag Kubernetes users expect. Each command has --version.
		Writer:                 stdout,
		ErrWriter:              stderr,
		HideHelpCommand:        true,
		UseShortOptionHandling: false,
		OnUsageError:           onUsageError,
		// run() reports every error and picks the exit code; without this
		// urfave/cli would print a cli.Exit error itself and call os.Exit.
		ExitErrHandler: func(*cli.Context, error) {},
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "version", Usage: "print the version and exit"},
		},
		Action: func(c *cli.Context) error {
			switch {
			case c.Bool("version"):
				fmt.Fprintln(c.App.Writer, "csi-registrar", version)
				return nil
			case c.Args().First() == "help":
				return cli.ShowAppHelp(c)
			case c.Args().Present():
				return usageError{fmt.Errorf("unknown command %q; the commands are register, driver, probe, doctor and version", c.Args().First())}
			}
			return cli.ShowAppHelp(c)
		},
		Commands: withUsageErrors([]*cli.Command{
			registerCommand(r.register),
			driverCommand(r.driver),
			probeCommand(),
			doctorCommand(),
			{
				Name:  "version",
				Usage: "print the version",
				Action: func(c *cli.Context) error {
					fmt.Fprintln(c.App.Writer, "csi-registrar", version)
					return nil
				},
			},
		}),
	}
}

// onUsageError turns a command line that does not parse into a usageError
// (exit code 2), for the app and for every command.
func onUsageError(c *cli.Context, err error, _ bool) error {
	name, flags := "csi-registrar", c.App.Flags
	if c.Command != nil && c.Command.Name != "" && c.Command.Name != c.App.Name {
		name, flags = name+" "+c.Command.Name, c.Command.Flags
	}
	return usageError{explainParseError(err, name, flags)}
}

// withUsageErrors makes every command fail with a usageError on a flag that
// does not parse or on a stray argument: flags after a stray argument would
// otherwise be ignored without a word.
func withUsageErrors(cmds []*cli.Command) []*cli.Command {
	for _, c := range cmds {
		c.OnUsageError = onUsageError
		c.Before = func(c *cli.Context) error {
			if c.Args().Present() {
				return usageError{fmt.Errorf("unexpected argument %q: %s takes flags only, and flags after it would be ignored",
					c.Args().First(), c.Command.Name)}
			}
			return nil
		}
	}
	return cmds
}

// usageError is a command line that does not parse.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func isUsageError(err error) bool {
	var u usageError
	return errors.As(err, &u)
}
