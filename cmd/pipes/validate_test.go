package main

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/validate")

// Each folder of testdata/validate is one run of pipes validate: args holds
// its arguments, one a line, and want its exit code, standard output and
// standard error (go test -run TestValidateGolden -update rewrites them).
func TestValidateGolden(t *testing.T) {
	for _, v := range []string{"PIPES_VALIDATE_TEST_QUEUE_URL", "PIPES_VALIDATE_TEST_API_URL", "PIPES_VALIDATE_TEST_REGION", "PIPES_VALIDATE_TEST_BATCH", "PIPES_VALIDATE_TEST_TOKEN"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	cases, err := filepath.Glob("testdata/validate/*/args")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no golden case: %v", err)
	}
	for _, argsFile := range cases {
		dir := filepath.Dir(argsFile)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			data, err := os.ReadFile(argsFile)
			if err != nil {
				t.Fatal(err)
			}
			args := append([]string{"validate"}, strings.Fields(string(data))...)
			code, stdout, stderr := runCLI(t, args...)
			got := "exit " + strconv.Itoa(code) + "\n-- stdout --\n" + stdout + "-- stderr --\n" + stderr
			if strings.Contains(got, "s3cr3t") {
				t.Errorf("a variable's value is in the output:\n%s", got)
			}
			wantFile := filepath.Join(dir, "want")
			if *update {
				if err := os.WriteFile(wantFile, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(wantFile)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("pipes %s:\n-- got --\n%s\n-- want (%s) --\n%s", strings.Join(args, " "), got, wantFile, want)
			}
		})
	}
}

func TestValidateFilesWalksFoldersRecursively(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"a.yaml", "b.yml", "notes.txt", "a_test.yaml", "sub/c.yaml", "sub/deeper/d.YAML", ".git/e.yaml", "node_modules/f.yaml"} {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, nil, 0o644)
	}
	want := []string{"a.yaml", "b.yml", "sub/c.yaml", "sub/deeper/d.YAML"}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"a folder", []string{dir}},
		{"FOLDER/...", []string{dir + "/..."}},
		{"named twice", []string{dir, filepath.Join(dir, "a.yaml")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, problems := validateFiles(tc.args)
			var rel []string
			for _, f := range files {
				r, _ := filepath.Rel(dir, f)
				rel = append(rel, filepath.ToSlash(r))
			}
			if !reflect.DeepEqual(rel, want) || len(problems) > 0 {
				t.Errorf("files %v, problems %v; want %v", rel, problems, want)
			}
		})
	}
	empty := t.TempDir()
	if _, problems := validateFiles([]string{empty, filepath.Join(dir, "missing.yaml")}); len(problems) != 2 {
		t.Errorf("problems %v, want an empty folder and a missing file", problems)
	}
}

func TestParseEnvFile(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want map[string]string
		err  string
	}{
		{"plain", "A=1\nB = two words \n", map[string]string{"A": "1", "B": "two words"}, ""},
		{"comments, blanks, export", "# c\n\nexport A=x # note\r\n", map[string]string{"A": "x"}, ""},
		{"double quotes", `A="a \"b\"\n#c" # note`, map[string]string{"A": "a \"b\"\n#c"}, ""},
		{"single quotes", `A='$x \n'`, map[string]string{"A": `$x \n`}, ""},
		{"empty", "A=\nB=''", map[string]string{"A": "", "B": ""}, ""},
		{"no equals", "A\n", nil, "f.env:1: want KEY=VALUE"},
		{"bad name", "1A=x", nil, "f.env:1:"},
		{"open quote", "A=\"secret", nil, "f.env:1: A: the double quote is not closed"},
		{"text after quote", "A='x' y", nil, "text after the closing quote"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseEnvFile("f.env", []byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("the error quotes the value: %v", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func FuzzParseEnvFile(f *testing.F) {
	f.Add("A=1\nexport B=\"x\\ny\" # c\nC='z'\n")
	f.Add("A=\"unterminated\n=\n")
	f.Fuzz(func(t *testing.T, in string) {
		vars, err := parseEnvFile("f.env", []byte(in))
		if err != nil {
			return
		}
		for k := range vars {
			if !envName(k) {
				t.Fatalf("variable name %q accepted", k)
			}
		}
	})
}
