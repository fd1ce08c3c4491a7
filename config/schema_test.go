package config

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"gopkg.in/yaml.v3"
)

const schemaFile = "../schema/pipeline.schema.json"

// The committed schema is the one the decoder gives now: change a key and
// this fails until `go run ./cmd/pipes schema > schema/pipeline.schema.json`.
func TestTheCommittedSchemaIsCurrent(t *testing.T) {
	got, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go run ./cmd/pipes schema > schema/pipeline.schema.json", schemaFile)
	}
	again, _ := Schema()
	if !bytes.Equal(got, again) {
		t.Error("Schema gives different bytes on each call")
	}
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	data, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatalf("the schema does not compile as draft 2020-12: %v", err)
	}
	return s
}

// instance reads a YAML pipeline file as the JSON value a schema checks.
func instance(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// Every example and valid test pipeline validates against the schema (a
// draft 2020-12 validator, github.com/santhosh-tekuri/jsonschema).
func TestEveryExampleValidatesAgainstTheSchema(t *testing.T) {
	s := compileSchema(t)
	var files []string
	for _, root := range []string{"../examples", "testdata/valid"} {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			ext := filepath.Ext(p)
			if err == nil && !d.IsDir() && (ext == ".yaml" || ext == ".yml") && !strings.HasSuffix(strings.TrimSuffix(p, ext), "_test") {
				files = append(files, p)
			}
			return nil
		})
	}
	if len(files) < 4 {
		t.Fatalf("found only %v", files)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := (Loader{LookupEnv: func(string) (string, bool) { return "", false }, SkipEnv: true}).Parse(f, data); err != nil {
				t.Skipf("not a valid pipeline without its environment: %v", err)
			}
			if err := s.Validate(instance(t, data)); err != nil {
				t.Errorf("%s does not validate against the schema: %v", f, err)
			}
		})
	}
}

func TestTheSchemaRefusesWhatTheLoaderRefuses(t *testing.T) {
	s := compileSchema(t)
	for _, tc := range []struct{ name, doc string }{
		{"unknown key", "name: a\nsource: {type: sqs, queue_name: q, colour: red}\ntarget: {type: stdout}\n"},
		{"no target", "name: a\nsource: {type: sqs, queue_name: q}\n"},
		{"batch size out of range", "name: a\nsource: {type: sqs, queue_name: q, batch_size: 0}\ntarget: {type: stdout}\n"},
		{"unknown source type", "name: a\nsource: {type: kafka}\ntarget: {type: stdout}\n"},
		{"a duration without a unit", "name: a\nsource: {type: sqs, queue_name: q, wait_time: 20}\ntarget: {type: stdout}\n"},
		{"a key at the top of a pipes: file", "pipes:\n  - name: a\n    source: {type: memory}\n    target: {type: stdout}\nname: b\n"},
		{"unknown retry key", "name: a\nsource: {type: memory}\ntarget: {type: http, url: 'http://h', retry: {tries: 3}}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := s.Validate(instance(t, []byte(tc.doc))); err == nil {
				t.Errorf("the schema takes %q", tc.doc)
			}
			if _, err := (Loader{}).Parse("t.yaml", []byte(tc.doc)); err == nil {
				t.Errorf("the loader takes %q", tc.doc)
			}
		})
	}
	for _, doc := range []string{
		"name: a\nsource: {type: sqs, queue_url: '${Q}', batch_size: '${BATCH:-10}', wait_time: 5s}\ntarget: {type: stdout}\n",
		"pipes:\n  - name: a\n    source: {type: memory}\n    target: {type: stdout}\n",
	} {
		if err := s.Validate(instance(t, []byte(doc))); err != nil {
			t.Errorf("the schema refuses %q: %v", doc, err)
		}
	}
}
