package httpcore

import (
	"strings"
	"testing"

	"github.com/pipesproject/pipes/pipe"
	"github.com/pipesproject/pipes/source"
)

func TestFillPathParametersFillsEachWildcardInOrder(t *testing.T) {
	tests := []struct {
		name, url string
		values    []string
		want      string
		wantErr   string
	}{
		{"no values leave the url as it is", "https://h/a/*", nil, "https://h/a/*", ""},
		{"constants in order", "https://h/a/*/b/*", []string{"1", "2"}, "https://h/a/1/b/2", ""},
		{"a bare path becomes a placeholder", "https://h/a/*", []string{"$.body.id"}, "https://h/a/<$.body.id>", ""},
		{"a placeholder stays", "https://h/a/*", []string{"<$.body.id>"}, "https://h/a/<$.body.id>", ""},
		{"too few wildcards", "https://h/a", []string{"x"}, "", "url has 0 '*' for 1 path_parameters"},
		{"too many wildcards", "https://h/*/*", []string{"x"}, "", "url has 2 '*' for 1 path_parameters"},
		{"a bare path that does not parse", "https://h/a/*", []string{"$.body..x"}, "", `path parameter 1 "$.body..x": input template:`},
		{"a placeholder that does not parse", "https://h/*/*", []string{"v1", "<$.body.id"}, "", `path parameter 2 "<$.body.id": input template:`},
		{"a dollar after the start is text", "https://h/a/*", []string{"US$.5"}, "https://h/a/US$.5", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FillPathParameters(tt.url, tt.values)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("= %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestHasPlaceholder(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   string
		want bool
	}{
		{"a placeholder", "id-<$.body.id>", true},
		{"a reserved variable", "<aws.pipes.pipe-name>", true},
		{"a bare path", "$.body.id", true},
		{"a bare path that does not parse: read as one, so that it is refused", "$.body.", true},
		{"a bare index path", "$[0]", true},
		{"a dollar elsewhere", "Bearer $.x", false},
		{"a plain constant", "application/json", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := HasPlaceholder(tt.in); got != tt.want {
				t.Errorf("HasPlaceholder(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

// FuzzNewDynamic: any URL, path parameter, query and header value either
// is refused or renders for a record without panicking; path parameters
// are accepted exactly when the URL has one '*' each, and an error never
// quotes the URL.
func FuzzNewDynamic(f *testing.F) {
	f.Add("https://h/a/*", "$.body.id", "<$.body.q>", "$.body.h", `{"id":"x/y","q":1,"h":"v"}`)
	f.Add("https://h/<$.body.a>/*?x=1", "v2", "k", "<aws.pipes.pipe-name>", `{"a":[1]}`)
	f.Add("https://secret@h/*/*", "$[", "$.", "$", `not json`)
	f.Fuzz(func(t *testing.T, rawURL, path, query, header, body string) {
		d, _, err := NewDynamic(DynamicConfig{
			URL: rawURL, PathParameters: []string{path},
			Query: map[string]string{"q": query}, Headers: map[string]string{"X-H": header},
		})
		if strings.Count(rawURL, "*") != 1 {
			if err == nil {
				t.Fatalf("%q with one path parameter accepted", rawURL)
			}
		}
		if err != nil {
			if len(rawURL) >= 8 && strings.Contains(err.Error(), rawURL) {
				t.Fatalf("the error quotes the url: %v", err)
			}
			return
		}
		ev, err := pipe.NewEvent(&source.Message{MessageID: "m", Body: body})
		if err != nil {
			return
		}
		_, _, _ = d.Render(rawURL, ev)
	})
}
