package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The Dockerfile is checked here, as no image can be built on the test
// machines: two stages, a static build (no cgo) whose output is the file
// the final stage copies and runs, a distroless or scratch base, a
// non-root user, and pipes itself as the entrypoint (PID 1, so SIGTERM
// reaches it). Then the build stage's own command is run and its binary
// checked to be static and to work.
func TestTheDockerfileBuildsAStaticNonRootImageOfTheSameBinary(t *testing.T) {
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var froms, users []string
	var build, copyFrom, entrypoint string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			froms = append(froms, line)
		case "USER":
			users = append(users, fields[1])
		case "RUN":
			if strings.Contains(line, "go build") {
				build = strings.TrimSpace(strings.TrimPrefix(line, fields[0]))
			}
		case "COPY":
			if strings.HasPrefix(fields[1], "--from=") {
				copyFrom = line
			}
		case "ENTRYPOINT":
			entrypoint = line
		}
	}
	if len(froms) != 2 || !regexp.MustCompile(`(distroless/static|^FROM scratch)`).MatchString(froms[1]) {
		t.Errorf("want a build stage and a distroless or scratch final stage, got %q", froms)
	}
	if len(users) == 0 || users[len(users)-1] == "root" || users[len(users)-1] == "0" {
		t.Errorf("the image does not run as a non-root user: USER %v", users)
	}
	out := regexp.MustCompile(`-o (\S+)`).FindStringSubmatch(build)
	if !strings.Contains(build, "CGO_ENABLED=0") || out == nil || !strings.Contains(build, "./cmd/pipes") {
		t.Fatalf("the build is not a static build of ./cmd/pipes with -o: %q", build)
	}
	copied := strings.Fields(copyFrom)
	if len(copied) != 4 || copied[2] != out[1] {
		t.Fatalf("the final stage copies %q, not the build's output %s", copyFrom, out[1])
	}
	if !strings.Contains(entrypoint, `"`+copied[3]+`"`) || strings.Contains(entrypoint, "sh") {
		t.Errorf("the entrypoint %q is not the copied binary %s run directly", entrypoint, copied[3])
	}

	// The same command, here (a minute or more on a fresh cache: -short
	// leaves it out).
	if testing.Short() {
		t.Skip("-short: the build stage's command is not run")
	}
	bin := filepath.Join(t.TempDir(), "pipes")
	cmdline := strings.Replace(build, out[1], bin, 1)
	cmdline = strings.ReplaceAll(cmdline, "${VERSION}", "v0.0.0-dockerfile-test")
	cmd := exec.Command("sh", "-c", cmdline)
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmdline, err, b)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("the binary has a dynamic loader: not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary needs %v: not static", libs)
	}
	v, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(v), "pipes v0.0.0-dockerfile-test ") {
		t.Errorf("pipes version = %q, %v", v, err)
	}
}
