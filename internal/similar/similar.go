// Package similar finds the known name a mistyped one was meant to be, for
// the "did you mean" of the pipeline file's and the AWS importer's errors.
package similar

import "strings"

// Closest is the first of known within two edits of name, ignoring case,
// the closest when several are; "" when none is.
func Closest(name string, known []string) string {
	best, bestDist := "", 3
	name = strings.ToLower(name)
	for _, k := range known {
		if d := editDistance(name, strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
