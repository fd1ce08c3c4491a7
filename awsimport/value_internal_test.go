package awsimport

import "testing"

func TestWithoutVarsIsTheShortestExpansion(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a ${STAGE} b", "a  b"},
		{"${A}${B_2}", ""},
		{"x ${A:-default} y", "x  y"},
		{"$${LITERAL} and ${VAR}", "${LITERAL} and "},
		{"$${", "${"},
		{"${not closed", "${not closed"},
		{"${1BAD}", "${1BAD}"},
		{"$$${A}", "$${A}"}, // "$" then the escape "$${" then "A}", as the loader reads it
	} {
		if got := withoutVars(tt.in); got != tt.want {
			t.Errorf("withoutVars(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
