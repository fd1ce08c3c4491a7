package main

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFormatVersion(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "68ba23c0ffee"},
		{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	for _, tc := range []struct {
		name     string
		info     *debug.BuildInfo
		ok       bool
		override string
		want     string
	}{
		{"go install @version", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v1.4.0"}}, true, "",
			"pipes v1.4.0 go1.26.1 linux/amd64"},
		{"a build from a checkout", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}, Settings: vcs}, true, "",
			"pipes (devel) (commit 68ba23c0ffee, 2026-12-01T10:00:00Z, modified) go1.26.1 linux/amd64"},
		{"-ldflags -X main.version", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"}, Settings: vcs[:2]}, true, "v2.0.0-rc1",
			"pipes v2.0.0-rc1 (commit 68ba23c0ffee) go1.26.1 linux/amd64"},
		{"no build info", nil, false, "", "pipes (unknown) " + runtime.Version() + " linux/amd64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatVersion(tc.info, tc.ok, tc.override, "linux/amd64"); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestVersionAndTheVersionFlagPrintTheSameLine(t *testing.T) {
	_, a, _ := runCLI(t, "version")
	code, b, stderr := runCLI(t, "--version")
	if code != 0 || a != b || !strings.HasPrefix(a, "pipes ") || !strings.Contains(a, "go1.") {
		t.Errorf("pipes version %q, pipes --version %q (exit %d, %s)", a, b, code, stderr)
	}
}
