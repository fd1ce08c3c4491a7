// Command pipes runs event pipelines described in YAML files: it long-polls
// queues in batches, filters, enriches and hands batches to targets, the way
// Amazon EventBridge Pipes does, on your own machines.
//
// Exit codes: 0 ok, 1 runtime failure, 2 bad usage or invalid configuration.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(err error) error   { return &exitError{code: 2, err: err} }
func runtimeErr(err error) error { return &exitError{code: 1, err: err} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the CLI with args and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil && ee.err.Error() != "" {
			fmt.Fprintln(stderr, ee.err)
		}
		return ee.code
	}
	// cobra's own errors: unknown command or flag.
	fmt.Fprintln(stderr, "pipes:", err)
	return 2
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "pipes",
		Short:         "Run event pipelines from queues to targets, the way EventBridge Pipes does",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.AddCommand(newRunCmd(stdout, stderr), newValidateCmd(stdout), newTestCmd(stdin, stdout), newDLQCmd(stdout, stderr), newVersionCmd(stdout))
	return root
}

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(stdout, "pipes", version)
			return nil
		},
	}
}
