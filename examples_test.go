package pipes_test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pipesproject/pipes"
	"github.com/pipesproject/pipes/config"
)

// Every pipeline file under examples/ loads and passes the checks of
// `pipes validate`: examples are documentation and must not rot.
func TestEveryExamplePipelineIsValid(t *testing.T) {
	var files []string
	filepath.WalkDir("examples", func(path string, d fs.DirEntry, err error) error {
		// NAME_test.yaml files are pipes test's test files, not pipelines.
		isTest := strings.HasSuffix(strings.TrimSuffix(path, filepath.Ext(path)), "_test")
		// NAME.k8s.yaml files are Kubernetes manifests (examples/sidecar),
		// checked by cmd/pipes' TestTheKubernetesManifestsFollowTheCodesRules.
		isManifest := strings.HasSuffix(path, ".k8s.yaml")
		if err == nil && !d.IsDir() && !isTest && !isManifest && (filepath.Ext(path) == ".yaml" || filepath.Ext(path) == ".yml") {
			files = append(files, path)
		}
		return nil
	})
	if len(files) == 0 {
		t.Fatal("no example pipeline found")
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			specs, err := config.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := pipes.NewRegistry().Check(specs); err != nil {
				t.Fatal(err)
			}
		})
	}
}
