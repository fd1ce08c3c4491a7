package config_test

import (
	"strings"
	"testing"

	"github.com/pipesproject/pipes/config"
)

func TestLoaderTargetTypesAcceptsAnEmbeddersOwnTargetType(t *testing.T) {
	const file = "name: p\nsource: {type: memory}\ntarget: {type: audit, url: \"https://audit.example\"}\n"
	tests := []struct {
		name    string
		types   []string
		wantErr string
	}{
		{"a registered type is accepted with the keys every target has", []string{"http", "audit"}, ""},
		{"an unregistered type is still an error naming the field", nil, `p.yaml:3:16: target.type: must be one of http, stdout, sqs, sns, eventbridge, lambda, kinesis, firehose, stepfunctions, cloudwatch_logs, func, rabbitmq, got "audit"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			specs, err := config.Loader{TargetTypes: tt.types}.Parse("p.yaml", []byte(file))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := specs[0].Target; got.Type != "audit" || got.URL != "https://audit.example" {
				t.Fatalf("target %q at %q, want audit at https://audit.example", got.Type, got.URL)
			}
		})
	}
}
