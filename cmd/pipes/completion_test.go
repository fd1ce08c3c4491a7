package main

import (
	"strings"
	"testing"
)

// Shell completion (cobra's __complete, which pipes completion's scripts
// call) offers the values of --log-format and --log-level, and pipeline
// files after -f.
func TestShellCompletionOffersFlagValuesAndPipelineFiles(t *testing.T) {
	tests := []struct {
		args []string
		want string // the candidates and the directive, as cobra prints them
	}{
		{[]string{"run", "--log-format", ""}, "text\tkey=value lines\njson\tJSON lines\n:4\n"},
		{[]string{"run", "--log-level", ""}, "debug\ninfo\nwarn\nerror\n:4\n"},
		{[]string{"run", "-f", ""}, "yaml\nyml\n:8\n"},
		{[]string{"validate", "--file", ""}, "yaml\nyml\n:8\n"},
		{[]string{"test", "-f", ""}, "yaml\nyml\n:8\n"},
		{[]string{"send", "-f", ""}, "yaml\nyml\n:8\n"},
		{[]string{"dlq", "inspect", "-f", ""}, "yaml\nyml\n:8\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, _ := runCLI(t, append([]string{"__complete"}, tt.args...)...)
			if code != 0 || stdout != tt.want {
				t.Errorf("pipes __complete %s: exit %d\n%s\nwant\n%s", strings.Join(tt.args, " "), code, stdout, tt.want)
			}
		})
	}
}
