package config

import (
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	env := map[string]string{"HOST": "db.local", "PORT": "5432", "EMPTY": "", "SECRET": "hunter2"}
	lookup := func(name string) (string, bool) { v, ok := env[name]; return v, ok }
	tests := []struct {
		name    string
		in      string
		want    string
		used    bool
		wantErr string
	}{
		{name: "text without a dollar stays as it is", in: "plain", want: "plain"},
		{name: "a set variable is replaced", in: "${HOST}", want: "db.local", used: true},
		{name: "variables are replaced inside text", in: "http://${HOST}:${PORT}/x", want: "http://db.local:5432/x", used: true},
		{name: "a default is used when the variable is unset", in: "${NOPE:-10}", want: "10", used: true},
		{name: "a default is used when the variable is empty", in: "${EMPTY:-10}", want: "10", used: true},
		{name: "an empty variable without default gives empty text", in: "a${EMPTY}b", want: "ab", used: true},
		{name: "a set variable wins over its default", in: "${PORT:-1}", want: "5432", used: true},
		{name: "an empty default is allowed", in: "${NOPE:-}", want: "", used: true},
		{name: "a default may hold colons and dashes", in: "${NOPE:-http://x:1/a-b}", want: "http://x:1/a-b", used: true},
		{name: "$${ writes a literal ${", in: "$${HOST}", want: "${HOST}"},
		{name: "a lone dollar stays", in: "cost $5 and $HOST", want: "cost $5 and $HOST"},
		{name: "a dollar before $${ stays", in: "$$${HOST}", want: "$${HOST}"},
		{name: "a dollar at the end stays", in: "x$", want: "x$"},
		{name: "an unset variable without default is an error naming it", in: "${NOPE}", wantErr: "environment variable NOPE is not set and has no default"},
		{name: "an unclosed reference is an error", in: "${HOST", wantErr: `"${" has no closing "}"`},
		{name: "an empty name is an error", in: "${}", wantErr: `invalid variable reference "${}"`},
		{name: "a name starting with a digit is an error", in: "${1A}", wantErr: `invalid variable reference "${1A}"`},
		{name: "other shell operators are errors", in: "${HOST-x}", wantErr: `invalid variable reference "${HOST-x}"`},
		{name: "a nested reference in a default is an error", in: "${NOPE:-${HOST}}", wantErr: "defaults are plain text"},
		{name: "an error after a replaced variable does not show its value", in: "${SECRET}${NOPE}", wantErr: "environment variable NOPE is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, used, err := expand(tt.in, lookup)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("expand(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("error %q shows a variable's value", err)
				}
				return
			}
			if err != nil || got != tt.want || used != tt.used {
				t.Fatalf("expand(%q) = %q, %v, %v; want %q, %v, nil", tt.in, got, used, err, tt.want, tt.used)
			}
		})
	}
}
