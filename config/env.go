package config

import (
	"fmt"
	"strings"
)

// expand replaces ${NAME} and ${NAME:-default} in s with the variable's
// value (the default when the variable is unset or empty) and $${ with a
// literal ${. It reports whether s held a reference. Its errors name the
// variable or quote the file's own text, never a variable's value.
func expand(s string, lookup func(string) (string, bool)) (string, bool, error) {
	if !strings.Contains(s, "$") {
		return s, false, nil
	}
	var b strings.Builder
	used := false
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", used, fmt.Errorf(`"${" has no closing "}" (write $${ for a literal ${)`)
			}
			ref := s[i+2 : i+end]
			name, def, hasDef := strings.Cut(ref, ":-")
			if !validVarName(name) {
				return "", used, fmt.Errorf("invalid variable reference %q: write ${NAME} or ${NAME:-default}, NAME being letters, digits and _", "${"+ref+"}")
			}
			if strings.Contains(def, "${") {
				return "", used, fmt.Errorf("the default of ${%s} holds a ${: defaults are plain text", name)
			}
			v, ok := lookup(name)
			switch {
			case ok && (v != "" || !hasDef):
				b.WriteString(v)
			case hasDef:
				b.WriteString(def)
			default:
				return "", used, fmt.Errorf("environment variable %s is not set and has no default", name)
			}
			used = true
			i += end + 1
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), used, nil
}

// validVarName reports whether name is a shell-style variable name.
func validVarName(name string) bool {
	if name == "" || (name[0] >= '0' && name[0] <= '9') {
		return false
	}
	for _, c := range []byte(name) {
		if c != '_' && !(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
