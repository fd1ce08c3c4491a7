package ui

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestTheVendoredUPlotIsTheLockedVersion checks that the uPlot the binary
// embeds (static/vendor, from its npm package) is the version that
// .ci/uplot/package-lock.json pins: its banner names the locked version,
// and, where `npm ci` has installed it (.ci/run does), its bytes are the
// package's dist files. To update: change the version in
// .ci/uplot/package.json, `npm install` there, and copy
// node_modules/uplot/dist/uPlot.iife.min.js and uPlot.min.css here.
func TestTheVendoredUPlotIsTheLockedVersion(t *testing.T) {
	lockFile := filepath.Join("..", ".ci", "uplot", "package-lock.json")
	b, err := os.ReadFile(lockFile)
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Packages map[string]struct {
			Version   string `json:"version"`
			Integrity string `json:"integrity"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		t.Fatalf("%s: %v", lockFile, err)
	}
	locked := lock.Packages["node_modules/uplot"]
	if locked.Version == "" || locked.Integrity == "" {
		t.Fatalf("%s pins no uplot", lockFile)
	}
	for _, f := range []string{"uPlot.iife.min.js", "uPlot.min.css"} {
		embedded, err := staticFS.ReadFile("static/vendor/" + f)
		if err != nil {
			t.Fatalf("the embedded %s: %v", f, err)
		}
		if f == "uPlot.iife.min.js" && !bytes.HasPrefix(embedded, []byte("/*! https://github.com/leeoniya/uPlot (v"+locked.Version+") */")) {
			t.Errorf("the embedded %s is not uPlot %s: it starts %q", f, locked.Version, embedded[:min(60, len(embedded))])
		}
		installed := filepath.Join("..", ".ci", "uplot", "node_modules", "uplot")
		pkg, err := os.ReadFile(filepath.Join(installed, "package.json"))
		if err != nil {
			t.Logf("%s not installed (cd .ci/uplot && npm ci): only the version is checked", installed)
			continue
		}
		var meta struct{ Version string }
		if err := json.Unmarshal(pkg, &meta); err != nil || meta.Version != locked.Version {
			t.Fatalf("the installed uplot is %q, the lock pins %s: run npm ci in .ci/uplot", meta.Version, locked.Version)
		}
		want, err := os.ReadFile(filepath.Join(installed, "dist", f))
		if err != nil {
			t.Fatal(err)
		}
		if sha256.Sum256(embedded) != sha256.Sum256(want) {
			t.Errorf("the embedded %s differs from uplot %s's dist/%s", f, locked.Version, f)
		}
	}
}
