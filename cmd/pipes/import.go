package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/awsimport"
	"github.com/pipesproject/pipes/config"
)

// newImportCmd is `pipes import aws`: EventBridge Pipes definitions
// (describe-pipe output, a CreatePipe body, CloudFormation, SAM or CDK
// templates) to a pipeline file.
func newImportCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import",
		Short: "Turn pipe definitions of other systems into pipeline files",
		Args:  cobra.NoArgs,
	}
	var from, out string
	var params []string
	aws := &cobra.Command{
		Use:   "aws --from FILE [-o OUT] [--param Key=Value]...",
		Short: "Import EventBridge Pipes: describe-pipe JSON, a CreatePipe body, or a CloudFormation/SAM/CDK template (exit 2 when anything was left out)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return usageErr(errors.New("pipes import aws: give the definition with --from FILE"))
			}
			opts, err := importOptions(params)
			if err != nil {
				return usageErr(err)
			}
			res, err := importAWSFrom(from, stdin, opts, stderr)
			if err != nil {
				return usageErr(err)
			}
			if res.YAML != nil {
				w := stdout
				if out != "" {
					if err := os.WriteFile(out, res.YAML, 0o644); err != nil {
						return runtimeErr(fmt.Errorf("writing the pipeline file: %w", err))
					}
					fmt.Fprintf(stderr, "wrote %d pipe(s) to %s\n", len(res.Pipes), out)
				} else if _, err := w.Write(res.YAML); err != nil {
					return runtimeErr(fmt.Errorf("writing the pipeline file: %w", err))
				}
			}
			switch {
			case len(res.Pipes) == 0:
				return usageErr(fmt.Errorf("pipes import aws: no pipe of %s could be imported", from))
			case len(res.LeftOut) > 0:
				return &exitError{code: 2, err: fmt.Errorf("pipes import aws: %d part(s) of %s were left out (listed above)", len(res.LeftOut), from)}
			}
			return nil
		},
	}
	fl := aws.Flags()
	fl.StringVar(&from, "from", "", "the definition: describe-pipe JSON, a CreatePipe body, or a CloudFormation/SAM/CDK template (YAML or JSON); - for standard input")
	fl.StringVarP(&out, "output", "o", "", "write the pipeline file here instead of stdout")
	fl.StringArrayVar(&params, "param", nil, "Key=Value for a template parameter, a pseudo parameter (AWS::Region) or a reference (OrdersQueue, OrdersQueue.Arn); repeatable")
	cmd.AddCommand(aws)
	return cmd
}

// importOptions reads --param Key=Value flags.
func importOptions(params []string) (awsimport.Options, error) {
	opts := awsimport.Options{Params: map[string]string{}}
	for _, p := range params {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return opts, fmt.Errorf("--param %q: want Key=Value", p)
		}
		opts.Params[k] = v
	}
	return opts, nil
}

// importAWSFile imports one file and reports on stderr what was left out,
// what the user should know, and the variables to set.
func importAWSFile(file string, opts awsimport.Options, stderr io.Writer) (*awsimport.Result, error) {
	return importAWSFrom(file, nil, opts, stderr)
}

// importAWSFrom is importAWSFile that reads stdin when file is "-".
func importAWSFrom(file string, stdin io.Reader, opts awsimport.Options, stderr io.Writer) (*awsimport.Result, error) {
	var data []byte
	var err error
	if file == "-" && stdin != nil {
		file = "<stdin>"
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the AWS definition: %w", err)
	}
	res, err := awsimport.Import(file, data, opts)
	if err != nil {
		return nil, err
	}
	for _, p := range res.LeftOut {
		fmt.Fprintf(stderr, "%s: left out: %s\n", file, p)
	}
	for _, p := range res.Notes {
		fmt.Fprintf(stderr, "%s: note: %s\n", file, p)
	}
	if len(res.Env) > 0 {
		fmt.Fprintf(stderr, "%s: set these environment variables (or pass --param): %s\n", file, strings.Join(res.Env, ", "))
	}
	return res, nil
}

// loadRunSpecs is loadSpecs for `pipes run`, which also takes AWS
// definitions (--aws FILE): each is imported in memory and loaded as a
// pipeline file. A definition of which anything would be left out is
// refused: `pipes import aws` shows what and writes a file to edit.
//
// A template parameter takes its value from --param (params, Key=Value),
// else from the environment variable of its name (QueueUrl, or QUEUE_URL
// as the import names it), else from its Default.
func loadRunSpecs(reg *pipes.Registry, files, awsFiles, params []string, stderr io.Writer) ([]config.Pipe, error) {
	if len(awsFiles) == 0 {
		if len(params) > 0 {
			return nil, usageErr(errors.New("--param gives values to the parameters of --aws definitions: give one with --aws FILE"))
		}
		return loadSpecs(reg, files)
	}
	opts, err := importOptions(params)
	if err != nil {
		return nil, usageErr(err)
	}
	// At run time the environment gives the template's parameters that
	// --param does not.
	opts.LookupEnv = os.LookupEnv
	var specs []config.Pipe
	if len(files) > 0 {
		s, err := config.Load(files...)
		if err != nil {
			return nil, usageErr(err)
		}
		specs = s
	}
	for _, f := range awsFiles {
		res, err := importAWSFile(f, opts, stderr)
		if err != nil {
			return nil, usageErr(err)
		}
		if len(res.LeftOut) > 0 {
			return nil, usageErr(fmt.Errorf("--aws %s: %d part(s) cannot run here (listed above); `pipes import aws --from %s -o FILE` writes what can, to edit", f, len(res.LeftOut), f))
		}
		s, err := config.Loader{}.Parse(f+" (imported)", res.YAML)
		if err != nil {
			return nil, usageErr(err)
		}
		specs = append(specs, s...)
	}
	seen := map[string]bool{}
	for _, s := range specs {
		if seen[s.Name] {
			return nil, usageErr(fmt.Errorf("two pipes are named %q", s.Name))
		}
		seen[s.Name] = true
	}
	if err := reg.Check(specs); err != nil {
		return nil, usageErr(err)
	}
	return specs, nil
}
