package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/pipesproject/pipes/config"
)

func newSchemaCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema (draft 2020-12) of pipeline files, for editors",
		Long: `Prints the JSON Schema (draft 2020-12) of pipeline files, generated from the
loader's own key definitions, so it cannot drift from what pipes run and
pipes validate take. The same schema is committed as
schema/pipeline.schema.json; point an editor at it with a first line

  # yaml-language-server: $schema=` + config.SchemaID + `

A schema catches unknown keys and wrong types as you type; pipes validate
checks the rest (what each source and target type takes, patterns,
templates, ranges between keys).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := config.Schema()
			if err != nil {
				return runtimeErr(err)
			}
			if _, err := stdout.Write(s); err != nil {
				return runtimeErr(fmt.Errorf("writing the schema: %w", err))
			}
			return nil
		},
	}
}
