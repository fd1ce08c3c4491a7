package main

import (
	"strings"
	"testing"
)

func TestTheStatusPageFlags(t *testing.T) {
	const quickstart = "../../examples/quickstart/pipeline.yaml"
	for _, tc := range []struct {
		name     string
		args     []string
		envToken string
		code     int
		stderr   string
	}{
		{"a non-loopback address without a token is a usage error", []string{"--ui", "0.0.0.0:0"}, "", 2, "needs a token: set --ui-token or PIPES_UI_TOKEN"},
		{"all interfaces without a token is a usage error", []string{"--ui", ":0"}, "", 2, "needs a token"},
		{"a bad address is a usage error", []string{"--ui", "nowhere"}, "", 2, "--ui: status page address"},
		{"loopback needs no token; actions are off", []string{"--ui", "127.0.0.1:0"}, "", 0, "actions=false"},
		{"a non-loopback address with --ui-token starts", []string{"--ui", "0.0.0.0:0", "--ui-token", "tok-flag-value"}, "", 0, "actions=true"},
		{"PIPES_UI_TOKEN stands for --ui-token", []string{"--ui", "0.0.0.0:0"}, "tok-env-value", 0, "actions=true"},
		{"a sample interval under 1s is a usage error", []string{"--ui", "127.0.0.1:0", "--ui-sample-interval", "100ms"}, "", 2, "--ui-sample-interval 100ms: give 1s to 1m"},
		{"a sample interval over 1m is a usage error", []string{"--ui", "127.0.0.1:0", "--ui-sample-interval", "2m"}, "", 2, "--ui-sample-interval 2m0s: give 1s to 1m"},
		{"a sample interval of 1s starts", []string{"--ui", "127.0.0.1:0", "--ui-sample-interval", "1s"}, "", 0, "actions=false"},
		{"a Prometheus URL starts", []string{"--ui", "127.0.0.1:0", "--ui-prometheus", "http://prometheus:9090"}, "", 0, "actions=false"},
		{"a Prometheus URL with credentials is a usage error, which does not show them", []string{"--ui", "127.0.0.1:0", "--ui-prometheus", "http://admin:tok-flag-value@prometheus:9090"}, "", 2, "--ui: status page: the Prometheus URL must not hold credentials"},
		{"a Prometheus URL without a scheme is a usage error", []string{"--ui", "127.0.0.1:0", "--ui-prometheus", "prometheus:9090"}, "", 2, "the Prometheus URL must be an http or https URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("PIPES_UI_TOKEN", tc.envToken)
			args := append([]string{"run", "--drain", "--metrics-addr", "", "-f", quickstart}, tc.args...)
			code, _, stderr := runCLI(t, args...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Fatalf("exit %d, want %d with %q in stderr:\n%s", code, tc.code, tc.stderr, stderr)
			}
			if strings.Contains(stderr, "tok-flag-value") || strings.Contains(stderr, "tok-env-value") {
				t.Fatal("the token is in the log")
			}
		})
	}
}
