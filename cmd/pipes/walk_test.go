package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The repository's own examples/ hold a Kubernetes manifest beside the
// pipelines: validate and test skip it with a note, and pass.
func TestValidateAndTestPassOnTheRepositorysExamples(t *testing.T) {
	for _, verb := range []string{"validate", "test"} {
		t.Run(verb, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, verb, "-f", "../../examples/...")
			if code != 0 {
				t.Fatalf("pipes %s -f examples/...: exit %d\nstdout:\n%s\nstderr:\n%s", verb, code, stdout, stderr)
			}
			note := "note: ../../examples/sidecar/deployment.k8s.yaml: skipped: a Kubernetes manifest (apiVersion and kind), not a pipeline file"
			if strings.Count(stderr, note) != 1 {
				t.Errorf("stderr lacks the note %q:\n%s", note, stderr)
			}
			if verb == "validate" && !strings.Contains(stdout, "(1 Kubernetes manifest skipped)") {
				t.Errorf("stdout:\n%s", stdout)
			}
		})
	}
}

// --exclude leaves out files and folders by name or by path under the
// folder; the summary of errors says how many of the files had them.
func TestValidateExcludesGlobsAndCountsTheFilesInError(t *testing.T) {
	dir := t.TempDir()
	good := "name: %s\nsource:\n  type: memory\ntarget:\n  type: stdout\n"
	for name, content := range map[string]string{
		"a.yaml":            strings.Replace(good, "%s", "a", 1),
		"b.yaml":            strings.Replace(good, "%s", "b", 1),
		"bad.yaml":          "name: bad\nsource:\n  type: memory\n  colour: red\ntarget:\n  type: stdout\n  outcom: x\n",
		"vendor/v.yaml":     "not: a pipe\n",
		"sub/c.yaml":        strings.Replace(good, "%s", "c", 1),
		"sub/app.k8s.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n---\napiVersion: apps/v1\nkind: Deployment\n",
		"sub/half.k8s.yaml": "apiVersion: v1\nkind: ConfigMap\n---\nname: not-a-manifest\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		exclude []string
		want    []string
	}{
		{"everything", nil, []string{"a.yaml", "b.yaml", "bad.yaml", "sub/c.yaml", "sub/half.k8s.yaml", "vendor/v.yaml"}},
		{"a name", []string{"bad.yaml"}, []string{"a.yaml", "b.yaml", "sub/c.yaml", "sub/half.k8s.yaml", "vendor/v.yaml"}},
		{"a folder, a pattern", []string{"vendor", "*.k8s.yaml"}, []string{"a.yaml", "b.yaml", "bad.yaml", "sub/c.yaml"}},
		{"a path under the folder", []string{"sub/*"}, []string{"a.yaml", "b.yaml", "bad.yaml", "vendor/v.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := walkPipelineFiles([]string{dir + "/..."}, tc.exclude)
			if err != nil {
				t.Fatal(err)
			}
			var rel []string
			for _, f := range w.files {
				r, _ := filepath.Rel(dir, f)
				rel = append(rel, filepath.ToSlash(r))
			}
			if !reflect.DeepEqual(rel, tc.want) || len(w.problems) > 0 {
				t.Errorf("files %v, problems %v; want %v", rel, w.problems, tc.want)
			}
		})
	}
	if _, err := walkPipelineFiles([]string{dir}, []string{"[a-"}); err == nil {
		t.Error("a bad glob is accepted")
	}
	code, _, stderr := runCLI(t, "validate", "-f", dir, "--exclude", "vendor", "--exclude", "half.k8s.yaml")
	if code != 2 || !strings.Contains(stderr, "2 errors in 1 of 4 files\n") || !strings.Contains(stderr, "app.k8s.yaml: skipped: a Kubernetes manifest") {
		t.Errorf("exit %d, stderr:\n%s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, "validate", "-f", dir, "--exclude", "vendor", "--exclude", "half.k8s.yaml", "--exclude", "bad.yaml")
	if code != 0 || !strings.Contains(stdout, "ok: 3 pipes in 3 files, 0 warnings (1 Kubernetes manifest skipped, 3 excluded)") {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "test", "-f", dir, "--exclude", "vendor", "--exclude", "half.k8s.yaml", "--exclude", "bad.yaml", "--input", "-", "--pipe", "a")
	if code != 0 {
		t.Errorf("pipes test --exclude: exit %d\n%s", code, stdout)
	}
}
