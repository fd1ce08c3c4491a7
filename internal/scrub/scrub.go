// Package scrub takes secrets (passwords, tokens, header values) out of
// texts (errors from libraries, answers servers echo, pages), in every
// form a server or library may quote them: raw, percent-encoded,
// JSON-escaped and base64-encoded. It is the one scrubber of pipes: the
// RabbitMQ source, target and dead-letter tools use it directly, the HTTP
// clients (internal/kit/httpcore) and the status page (ui) through their own
// placeholders.
package scrub

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
)

// Placeholder stands in an error's text where a secret was.
const Placeholder = "xxxxx"

// MinEncoded is the length, in bytes, of the shortest value whose base64
// forms are secrets: a shorter value encodes to 4 or fewer characters
// ("YWI", "Zm9v"), which ordinary text holds by chance. Raw and escaped
// forms of any length are kept.
const MinEncoded = 4

// minMiddle is the length, in characters, of the shortest aligned base64
// middle kept (see Forms): 8 characters are 6 bytes of the secret.
const minMiddle = 8

// Secrets are the strings kept out of texts: the forms of secret values
// (see Forms). Secrets are read-only once made, so safe for concurrent
// use; appending the Secrets of another New is fine.
type Secrets []string

// New returns the secrets of values (empty ones are left out): every form
// of each (see Forms).
func New(values ...string) Secrets {
	var s Secrets
	for _, v := range values {
		s = append(s, Forms(v)...)
	}
	// Longest first (httpcore reads the longest length off the front);
	// equal ones side by side, for Compact.
	slices.SortFunc(s, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	return slices.Compact(s)
}

// Forms returns the forms a secret value v takes when a server or a
// library quotes it, v first; none for "":
//   - v itself;
//   - its URL query and path escapes;
//   - its JSON string escape (without the quotes);
//   - when v has at least MinEncoded bytes, its base64 encodings, standard
//     and URL-safe, padded and raw, with the query escape of the standard
//     ones (a base64 value put in a URL);
//   - and the three aligned middles of those encodings: when v is part of a
//     longer text that was base64-encoded, v starts at one of three
//     offsets in a 3-byte group, and the characters that encode v's bytes
//     from the first whole group on do not depend on the text around it.
//     A middle is kept when it is at least 8 characters (6 bytes of v); the
//     one or two characters at each edge, which mix v with its neighbours,
//     are left.
func Forms(v string) []string {
	if v == "" {
		return nil
	}
	forms := []string{v, url.QueryEscape(v), url.PathEscape(v)}
	if b, err := json.Marshal(v); err == nil {
		forms = append(forms, string(b[1:len(b)-1]))
	}
	if len(v) >= MinEncoded {
		std := base64.StdEncoding.EncodeToString([]byte(v))
		raw := base64.RawStdEncoding.EncodeToString([]byte(v))
		forms = append(forms, std, raw, url.QueryEscape(std), url.QueryEscape(raw),
			base64.URLEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)))
		for skip := range 3 {
			if len(v) <= skip {
				break
			}
			part := v[skip:]
			part = part[:len(part)/3*3]
			if enc := base64.RawStdEncoding.EncodedLen(len(part)); enc < minMiddle {
				continue
			}
			forms = append(forms, base64.RawStdEncoding.EncodeToString([]byte(part)),
				base64.RawURLEncoding.EncodeToString([]byte(part)))
		}
	}
	out := forms[:1]
	for _, f := range forms[1:] {
		if f != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// Error returns err with every secret in its text replaced by Placeholder,
// or err itself when its text holds none. The result unwraps to err, so
// errors.Is and errors.As (pipe.IsPermanent, say) still see what it wraps;
// code that prints an unwrapped error must scrub it too.
func (s Secrets) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := s.Text(msg)
	if clean == msg {
		return err
	}
	return &scrubbed{msg: clean, err: err}
}

// Text returns text with every secret replaced by Placeholder.
func (s Secrets) Text(text string) string { return s.Replace(text, Placeholder) }

// Contains reports whether text holds a secret.
func (s Secrets) Contains(text string) bool {
	for _, v := range s {
		if v != "" && strings.Contains(text, v) {
			return true
		}
	}
	return false
}

// Replace returns text with every stretch that is covered by secrets
// (overlapping or adjacent ones merged) replaced by one placeholder. The
// stretches are found in text as given, so the result holds a secret only
// where one runs into the placeholder itself: a placeholder none of whose
// characters a secret's forms hold leaves none.
func (s Secrets) Replace(text, placeholder string) string {
	var spans [][2]int
	for _, v := range s {
		if v == "" {
			continue
		}
		for from := 0; ; {
			i := strings.Index(text[from:], v)
			if i < 0 {
				break
			}
			start := from + i
			spans = append(spans, [2]int{start, start + len(v)})
			from = start + 1
		}
	}
	if len(spans) == 0 {
		return text
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return a[0] - b[0] })
	var b strings.Builder
	b.Grow(len(text))
	at := 0 // text before at is written
	for i := 0; i < len(spans); {
		start, end := spans[i][0], spans[i][1]
		for i++; i < len(spans) && spans[i][0] <= end; i++ {
			end = max(end, spans[i][1])
		}
		b.WriteString(text[at:start])
		b.WriteString(placeholder)
		at = end
	}
	b.WriteString(text[at:])
	return b.String()
}

// HeaderValue returns the secret values of a header value: the value; when
// it is a scheme and credentials ("Bearer t0ken", "Token t0ken",
// "Basic dXNlcjpwdw=="), the credentials; and for Basic, the decoded
// "user:password", the user and the password. Parts (all but the value)
// shorter than MinEncoded bytes are left out: a user "ops" would blank
// out ordinary text.
func HeaderValue(v string) []string {
	out := []string{v}
	scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !token(scheme) {
		return out
	}
	parts := []string{strings.TrimSpace(cred)}
	if strings.EqualFold(scheme, "Basic") {
		if dec, err := base64.StdEncoding.DecodeString(parts[0]); err == nil {
			user, pass, _ := strings.Cut(string(dec), ":")
			parts = append(parts, string(dec), user, pass)
		}
	}
	for _, p := range parts {
		if len(p) >= MinEncoded {
			out = append(out, p)
		}
	}
	return out
}

// Userinfo returns the secret values of a URL's userinfo: the password
// and "user:password" (whose base64 is what an HTTP client sends as Basic
// credentials), or nothing without a password. The user alone is a
// secret only to callers that say so.
func Userinfo(user, password string) []string {
	if password == "" {
		return nil
	}
	return []string{password, user + ":" + password}
}

// token reports whether s is an HTTP token (RFC 9110), as an auth scheme is.
func token(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }
