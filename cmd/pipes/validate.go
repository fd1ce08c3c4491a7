package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/pipesproject/pipes"
)

func newValidateCmd(stdout io.Writer) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "validate -f FILE...",
		Short: "Check pipeline files without touching any queue (exit 2 and file:line:col: field: message for every problem)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			specs, err := loadSpecs(pipes.NewRegistry(), files)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "ok: %d pipe(s)\n", len(specs))
			return nil
		},
	}
	cmd.Flags().StringArrayVarP(&files, "file", "f", nil, "pipeline file or folder (repeatable)")
	return cmd
}
