//go:build keepdeps

// Package keep pins the chosen dependencies in go.mod while the packages
// that use them are written. It is never built.
package keep

import (
	_ "github.com/aws/aws-sdk-go-v2/aws"
	_ "github.com/aws/aws-sdk-go-v2/config"
	_ "github.com/aws/aws-sdk-go-v2/credentials"
	_ "github.com/aws/aws-sdk-go-v2/service/sqs"
	_ "github.com/aws/smithy-go"
	_ "github.com/expr-lang/expr"
	_ "github.com/itchyny/gojq"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/sourcegraph/conc"
	_ "github.com/spf13/cobra"
	_ "golang.org/x/sync/errgroup"
	_ "gopkg.in/yaml.v3"
)
