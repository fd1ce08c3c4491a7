package main

import (
	"os"
	"strings"
	"testing"
)

func TestSchemaPrintsTheCommittedSchema(t *testing.T) {
	code, stdout, stderr := runCLI(t, "schema")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	want, err := os.ReadFile("../../schema/pipeline.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if stdout != string(want) {
		t.Error("pipes schema differs from schema/pipeline.schema.json: run go run ./cmd/pipes schema > schema/pipeline.schema.json")
	}
	if !strings.Contains(stdout, `"$schema": "https://json-schema.org/draft/2020-12/schema"`) {
		t.Errorf("not a draft 2020-12 schema:\n%.300s", stdout)
	}
}

func TestCompletionScriptsAreThere(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		code, stdout, stderr := runCLI(t, "completion", shell)
		if code != 0 || !strings.Contains(stdout, "pipes") {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %s", shell, code, len(stdout), stderr)
		}
	}
}
