package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version, when set at build time (-ldflags "-X main.version=v1.2.3"),
// is the version printed instead of the module's.
var version = ""

func newVersionCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version: module version, commit and Go version (also --version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(stdout, versionLine())
			return nil
		},
	}
}

// versionLine is what `pipes version` and `pipes --version` print, from
// the binary's build info.
func versionLine() string {
	info, ok := debug.ReadBuildInfo()
	return formatVersion(info, ok, version, runtime.GOOS+"/"+runtime.GOARCH)
}

// formatVersion writes "pipes VERSION (commit REV, TIME[, modified]) GOVERSION
// PLATFORM": the module version (v1.2.3 from go install …@v1.2.3, a pseudo
// version, or "(devel)" for a build from a checkout) unless override is
// set, and the commit of a build from a git checkout.
func formatVersion(info *debug.BuildInfo, ok bool, override, platform string) string {
	v, goVersion := "(unknown)", runtime.Version()
	var rev, at string
	modified := false
	if ok && info != nil {
		if info.Main.Version != "" {
			v = info.Main.Version
		}
		if info.GoVersion != "" {
			goVersion = info.GoVersion
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				at = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	if override != "" {
		v = override
	}
	var b strings.Builder
	fmt.Fprintf(&b, "pipes %s", v)
	if rev != "" {
		fmt.Fprintf(&b, " (commit %s", rev)
		if at != "" {
			fmt.Fprintf(&b, ", %s", at)
		}
		if modified {
			b.WriteString(", modified")
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, " %s %s", goVersion, platform)
	return b.String()
}
